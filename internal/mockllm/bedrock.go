package mockllm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// AWSCredentials are the keys Bedrock requests must be signed with, and
// the region they are for.
type AWSCredentials struct {
	AccessKeyID, SecretAccessKey, Region string
}

// bedrockStreamType is the content type of AWS's event stream.
const bedrockStreamType = "application/vnd.amazon.eventstream"

// sigV4Scheme begins a SigV4 Authorization header.
const sigV4Scheme = "AWS4-HMAC-SHA256 "

// maxSigningSkew is how far a request's x-amz-date may be from the mock's
// clock, as AWS allows.
const maxSigningSkew = 5 * time.Minute

// signed reports whether r carries a SigV4 signature (checked once its
// body is read, by verifySigV4).
func signed(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Authorization"), sigV4Scheme)
}

// verifySigV4 checks r's signature as AWS does: it recomputes it with
// AWS's own signer from the request as it arrived — its method, path,
// host, the headers it says it signed and the SHA-256 of its body — and
// the known keys, and compares.
func (a *AWSCredentials) verifySigV4(r *http.Request, body []byte, now time.Time) error {
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(r.Header.Get("Authorization"), sigV4Scheme), ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[0] != a.AccessKeyID || scope[2] != a.Region || scope[3] != "bedrock" || scope[4] != "aws4_request" {
		return fmt.Errorf("credential scope %q is not %s/…/%s/bedrock/aws4_request", fields["Credential"], a.AccessKeyID, a.Region)
	}
	signedHeaders := strings.Split(fields["SignedHeaders"], ";")
	for _, must := range []string{"host", "x-amz-date"} {
		if !slices.Contains(signedHeaders, must) {
			return fmt.Errorf("%s is not signed", must)
		}
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("x-amz-date: %w", err)
	}
	if d := now.Sub(at); d > maxSigningSkew || d < -maxSigningSkew {
		return fmt.Errorf("x-amz-date is %s from now", d)
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != hash {
		return errors.New("x-amz-content-sha256 is not the body's hash")
	}
	again, err := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), nil)
	if err != nil {
		return err
	}
	for _, name := range signedHeaders {
		if name != "host" && name != "x-amz-date" {
			again.Header[http.CanonicalHeaderKey(name)] = r.Header.Values(name)
		}
	}
	creds := aws.Credentials{AccessKeyID: a.AccessKeyID, SecretAccessKey: a.SecretAccessKey, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, again, hash, "bedrock", a.Region, at); err != nil {
		return err
	}
	if got, want := r.Header.Get("Authorization"), again.Header.Get("Authorization"); subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return errors.New("the signature does not match")
	}
	return nil
}

// bedrockSignatureMismatch is Bedrock's message for a wrong signature.
const bedrockSignatureMismatch = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."

// bedrockModel is the model id of a Bedrock path, /model/{id}/converse.
func bedrockModel(path string) string {
	rest := strings.TrimPrefix(path, "/model/")
	id, _, _ := strings.Cut(rest, "/")
	return id
}

func readBedrock(req *Request, a *asked) {
	b := req.Body
	a.model = bedrockModel(req.Path)
	a.stream = strings.HasSuffix(req.Path, "/converse-stream")
	readTurns(list(b["messages"]), a, func(block map[string]any) bool { return block["toolResult"] != nil })
	tc := object(b["toolConfig"])
	for _, t := range list(tc["tools"]) {
		spec := object(t["toolSpec"])
		name, _ := spec["name"].(string)
		a.tools = append(a.tools, tool{name: name, schema: object(object(spec["inputSchema"])["json"])})
	}
	c := object(tc["toolChoice"])
	switch {
	case c["any"] != nil:
		a.choice.mode = "forced"
	case c["tool"] != nil:
		a.choice.mode = "forced"
		a.choice.name, _ = object(c["tool"])["name"].(string)
	default:
		a.choice.mode = "auto"
	}
}

// bedrockUsage reports usage as Bedrock does: input tokens apart from
// those read from the cache (a fifth of the prompt here) and written to it
// (a tenth).
func bedrockUsage(u Usage, output int) map[string]any {
	read, write := u.Prompt/5, u.Prompt/10
	return map[string]any{"inputTokens": u.Prompt - read - write, "outputTokens": output, "totalTokens": u.Prompt + output,
		"cacheReadInputTokens": read, "cacheWriteInputTokens": write}
}

// bedrock is the Converse answer, or ConverseStream's events in AWS's
// event-stream framing: messageStart, contentBlockStart (tool use),
// contentBlockDelta, contentBlockStop, messageStop, metadata.
func bedrock(a asked, rep reply) (any, stream) {
	var content []any
	stop := "end_turn"
	if len(rep.calls) == 0 {
		content = append(content, map[string]any{"text": rep.text()})
	} else {
		if !rep.forced {
			content = append(content, map[string]any{"text": preamble})
		}
		for i, c := range rep.calls {
			var input any
			if err := json.Unmarshal([]byte(c.arguments()), &input); err != nil {
				input = map[string]any{}
			}
			content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": ToolCallID(Bedrock, i), "name": c.name, "input": input}})
		}
		stop = "tool_use"
	}
	if rep.cut {
		stop = "max_tokens"
	}
	usage := bedrockUsage(rep.usage, rep.usage.Completion)
	whole := map[string]any{"output": map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": stop, "usage": usage, "metrics": map[string]any{"latencyMs": 100}}

	s := stream{format: Bedrock}
	pieces := 0
	add := func(name string, payload map[string]any, piece bool) {
		s.events = append(s.events, bedrockFrame("event", name, payload))
		if piece {
			if pieces++; pieces == 2 {
				s.first = len(s.events)
			}
		}
	}
	add("messageStart", map[string]any{"role": "assistant"}, false)
	block := 0
	text := func(pieces []string) {
		for _, t := range pieces {
			add("contentBlockDelta", map[string]any{"contentBlockIndex": block, "delta": map[string]any{"text": t}}, true)
		}
		add("contentBlockStop", map[string]any{"contentBlockIndex": block}, false)
		block++
	}
	if len(rep.calls) == 0 {
		text(rep.pieces)
	} else if !rep.forced {
		text([]string{preamble})
	}
	for i, c := range rep.calls {
		add("contentBlockStart", map[string]any{"contentBlockIndex": block,
			"start": map[string]any{"toolUse": map[string]any{"toolUseId": ToolCallID(Bedrock, i), "name": c.name}}}, false)
		for _, frag := range c.args {
			add("contentBlockDelta", map[string]any{"contentBlockIndex": block, "delta": map[string]any{"toolUse": map[string]any{"input": frag}}}, true)
		}
		add("contentBlockStop", map[string]any{"contentBlockIndex": block}, false)
		block++
	}
	add("messageStop", map[string]any{"stopReason": stop}, false)
	add("metadata", map[string]any{"usage": usage, "metrics": map[string]any{"latencyMs": 100}}, false)
	if pieces < 2 {
		s.first = len(s.events)
	}
	return whole, s
}

// bedrockFrame is one event-stream message, encoded by AWS's encoder:
// an event (name is its :event-type) or an exception (its
// :exception-type), with a JSON payload.
func bedrockFrame(messageType, name string, payload any) string {
	var m eventstream.Message
	m.Headers.Set(":message-type", eventstream.StringValue(messageType))
	if messageType == "exception" {
		m.Headers.Set(":exception-type", eventstream.StringValue(name))
	} else {
		m.Headers.Set(":event-type", eventstream.StringValue(name))
	}
	m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	m.Payload = mustJSON(payload)
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, m); err != nil {
		return "" // cannot happen: the headers and payload are small
	}
	return b.String()
}
