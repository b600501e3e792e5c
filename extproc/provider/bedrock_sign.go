package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/tollgate/tollgate/config"
)

// This file signs Bedrock requests. The signature covers exactly what
// reaches AWS: the method, the :path the upstream step sets, and the
// headers host (the :authority it sets), content-type,
// x-amz-content-sha256 (the SHA-256 of the final body), x-amz-date and,
// for temporary credentials, x-amz-security-token — all set by the step
// as signed, and none of them touched by the proxy after it. Headers the
// proxy adds or passes (content-length, which the step sets anyway, accept,
// x-request-id, trace context, x-envoy-*) are not signed, so none can
// break the signature.

// BedrockService is the SigV4 service name of the Bedrock runtime.
const BedrockService = "bedrock"

// bedrockCredentialTimeout bounds fetching credentials (an instance or
// container role's endpoint, STS for web identity); the cache makes it
// rare.
const bedrockCredentialTimeout = 10 * time.Second

// bedrockExpiryWindow refreshes temporary credentials this long before
// they expire (with jitter), so that no request is signed with ones that
// expire in flight.
const bedrockExpiryWindow = 5 * time.Minute

// maxBedrockProviders bounds the cached credential sources; beyond it (a
// configuration reloaded many times with new keys) the cache starts over.
const maxBedrockProviders = 256

// bedrockCredentials caches one credentials source per provider
// configuration: the provider's static keys, or the AWS SDK's default
// chain (environment, shared profile, web identity, container and
// instance roles), each behind an aws.CredentialsCache.
type bedrockCredentials struct {
	mu      sync.Mutex
	sources map[string]aws.CredentialsProvider
	// load loads the default chain's configuration (the AWS SDK's
	// LoadDefaultConfig; a test's fake).
	load func(ctx context.Context, region string) (aws.CredentialsProvider, error)
}

var defaultBedrockCredentials = &bedrockCredentials{load: loadDefaultChain}

// refreshEarly makes a credentials cache refresh bedrockExpiryWindow
// (less up to half of it, at random, so that replicas spread out) before
// the credentials expire.
func refreshEarly(o *aws.CredentialsCacheOptions) {
	o.ExpiryWindow, o.ExpiryWindowJitterFrac = bedrockExpiryWindow, 0.5
}

func loadDefaultChain(ctx context.Context, region string) (aws.CredentialsProvider, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region), awsconfig.WithCredentialsCacheOptions(refreshEarly))
	if err != nil {
		return nil, err
	}
	if cfg.Credentials == nil {
		return nil, fmt.Errorf("no AWS credentials found")
	}
	return cfg.Credentials, nil
}

// source is the provider's credentials source, made once per provider
// configuration.
func (c *bedrockCredentials) source(ctx context.Context, p *config.Provider) (aws.CredentialsProvider, error) {
	key := p.Name + "\x00" + p.Region + "\x00" + p.AccessKeyID.Reveal() + "\x00" + p.SecretAccessKey.Reveal()
	c.mu.Lock()
	defer c.mu.Unlock()
	if src, ok := c.sources[key]; ok {
		return src, nil
	}
	var src aws.CredentialsProvider
	if p.AccessKeyID != "" {
		src = credentials.NewStaticCredentialsProvider(p.AccessKeyID.Reveal(), p.SecretAccessKey.Reveal(), "")
	} else {
		var err error
		if src, err = c.load(ctx, p.Region); err != nil {
			return nil, fmt.Errorf("loading AWS credentials: %w", err)
		}
	}
	if _, cached := src.(*aws.CredentialsCache); !cached {
		src = aws.NewCredentialsCache(src, refreshEarly)
	}
	if c.sources == nil || len(c.sources) >= maxBedrockProviders {
		c.sources = make(map[string]aws.CredentialsProvider)
	}
	c.sources[key] = src
	return src, nil
}

// authorize sets the request's credential: the Bedrock API key as a bearer
// token, or a SigV4 signature.
func (b bedrock) authorize(up *Upstream, p *config.Provider) error {
	scheme, authority, err := bedrockAuthority(p, up.Authority)
	if err != nil {
		return err
	}
	up.Authority = authority
	if k := p.APIKey.Reveal(); k != "" {
		up.Headers = append(up.Headers, Header{"authorization", "Bearer " + k})
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), bedrockCredentialTimeout)
	defer cancel()
	src, err := b.creds.source(ctx, p)
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrCredential, p.Name, err)
	}
	creds, err := src.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("%w %s: AWS credentials: %w", ErrCredential, p.Name, err)
	}
	now := b.env.now()
	if !creds.HasKeys() {
		return fmt.Errorf("%w %s: the AWS credentials have no keys", ErrCredential, p.Name)
	}
	if creds.CanExpire && !creds.Expires.After(now) {
		// A source that could not refresh them hands back what it had:
		// AWS would refuse the signature (ExpiredToken).
		return fmt.Errorf("%w %s: the AWS credentials expired at %s", ErrCredential, p.Name, creds.Expires.UTC().Format(time.RFC3339))
	}
	signed, err := signBedrock(ctx, creds, p.Region, scheme, up, now)
	if err != nil {
		return fmt.Errorf("provider %s: signing: %w", p.Name, err)
	}
	up.Headers = append(up.Headers, signed...)
	return nil
}

// bedrockAuthority is the base URL's scheme and the authority to send,
// without a default port (the signer leaves it out of the signed host, so
// the Host header must too).
func bedrockAuthority(p *config.Provider, authority string) (string, string, error) {
	u, err := url.Parse(p.BaseURL)
	if err != nil {
		return "", "", fmt.Errorf("provider %s: base_url: %w", p.Name, err)
	}
	if host, port, err := net.SplitHostPort(authority); err == nil &&
		(u.Scheme == "https" && port == "443" || u.Scheme == "http" && port == "80") {
		authority = host
	}
	return u.Scheme, authority, nil
}

// signBedrock signs up (its path, authority, body and headers) with
// SigV4 for the Bedrock runtime in region at now, and returns the headers
// to add: x-amz-content-sha256, x-amz-date, authorization and, for
// temporary credentials, x-amz-security-token. Every header of up but
// accept is signed, and the host; nothing else.
func signBedrock(ctx context.Context, creds aws.Credentials, region, scheme string, up *Upstream, now time.Time) ([]Header, error) {
	sum := sha256.Sum256(up.Body)
	hash := hex.EncodeToString(sum[:])
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+up.Authority+up.Path, nil)
	if err != nil {
		return nil, err
	}
	r.Header = make(http.Header, len(up.Headers)+4)
	for _, h := range up.Headers {
		if h.Name != "accept" {
			r.Header.Set(h.Name, h.Value)
		}
	}
	r.Header.Set("x-amz-content-sha256", hash)
	// ContentLength stays 0: content-length is not signed (the proxy's
	// framing), and neither is accept.
	if err := v4.NewSigner().SignHTTP(ctx, creds, r, hash, BedrockService, region, now.UTC()); err != nil {
		return nil, err
	}
	out := []Header{
		{"x-amz-content-sha256", hash},
		{"x-amz-date", r.Header.Get("X-Amz-Date")},
		{"authorization", r.Header.Get("Authorization")},
	}
	if tok := r.Header.Get("X-Amz-Security-Token"); tok != "" {
		out = append(out, Header{"x-amz-security-token", tok})
	}
	return out, nil
}
