package manage

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"io"
	"math/big"
	"mime/quotedprintable"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// smtpSeen is what the test's SMTP server was told.
type smtpSeen struct {
	mu          sync.Mutex
	conns       int
	from, rcpt  string
	auth        string // the AUTH PLAIN credentials, decoded
	authOverTLS bool
	startTLS    bool
	data        string
}

func (s *smtpSeen) get() smtpSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return smtpSeen{conns: s.conns, from: s.from, rcpt: s.rcpt, auth: s.auth, authOverTLS: s.authOverTLS, startTLS: s.startTLS, data: s.data}
}

// testCert is a self-signed certificate for 127.0.0.1 and the pool that
// trusts it.
func testCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "mail.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// smtpServer serves SMTP on 127.0.0.1 (one connection at a time),
// offering STARTTLS when cert is set; it stops with the test.
func smtpServer(t *testing.T, cert *tls.Certificate) (port int, seen *smtpSeen) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	seen = &smtpSeen{}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			seen.mu.Lock()
			seen.conns++
			seen.mu.Unlock()
			serveSMTP(conn, cert, seen)
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().(*net.TCPAddr).Port, seen
}

func serveSMTP(conn net.Conn, cert *tls.Certificate, seen *smtpSeen) {
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := textproto.NewReader(bufio.NewReader(conn))
	say := func(s string) { _, _ = io.WriteString(conn, s+"\r\n") }
	overTLS := false
	say("220 mail.test ESMTP")
	for {
		line, err := r.ReadLine()
		if err != nil {
			return
		}
		verb, arg, _ := strings.Cut(line, " ")
		seen.mu.Lock()
		switch strings.ToUpper(verb) {
		case "EHLO":
			if cert != nil && !overTLS {
				say("250-mail.test\r\n250-STARTTLS\r\n250 AUTH PLAIN")
			} else {
				say("250-mail.test\r\n250 AUTH PLAIN")
			}
		case "STARTTLS":
			say("220 go ahead")
			tc := tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{*cert}})
			if tc.Handshake() != nil {
				seen.mu.Unlock()
				return
			}
			conn, overTLS, seen.startTLS = tc, true, true
			r = textproto.NewReader(bufio.NewReader(conn))
		case "AUTH":
			b64, _ := strings.CutPrefix(arg, "PLAIN ")
			raw, _ := base64.StdEncoding.DecodeString(b64)
			seen.auth, seen.authOverTLS = string(raw), overTLS
			say("235 ok")
		case "MAIL":
			seen.from = arg
			say("250 ok")
		case "RCPT":
			seen.rcpt = arg
			say("250 ok")
		case "DATA":
			say("354 go on")
			seen.mu.Unlock()
			b, err := r.ReadDotBytes()
			if err != nil {
				return
			}
			seen.mu.Lock()
			seen.data = string(b)
			say("250 queued")
		case "QUIT":
			say("221 bye")
			seen.mu.Unlock()
			return
		default:
			say("502 no")
		}
		seen.mu.Unlock()
	}
}

// mailingEnv is a people environment whose service mails through m.
func mailingEnv(t *testing.T, m Mailer) (*peopleEnv, *Service) {
	t.Helper()
	e := newPeopleEnv(t)
	svc, err := New(Options{Store: e.st, Config: e.svc.opt.Config, Now: e.clock.Now, Mailer: m})
	require.NoError(t, err)
	return e, svc
}

func smtpMailer(port int, starttls string, pool *x509.CertPool) *SMTPMailer {
	return &SMTPMailer{Config: config.SMTP{Host: "127.0.0.1", Port: port, Username: "tollgate", Password: "s3cret-pw",
		From: "Tollgate <tollgate@example.com>", StartTLS: starttls}, PublicURL: "https://tg.example.com",
		TLS: &tls.Config{RootCAs: pool}, Timeout: 5 * time.Second}
}

func TestAnInvitationIsMailedOverTLSWithItsLink(t *testing.T) {
	cert, pool := testCert(t)
	port, seen := smtpServer(t, &cert)
	e, svc := mailingEnv(t, smtpMailer(port, config.StartTLSAuto, pool))
	tm := e.newTeam(t, "mail.example.com")
	got, err := svc.Invite(context.Background(), tm.actors[store.RoleOwner],
		InviteRequest{AccountID: tm.account.ID, Email: "dev@example.org", Role: store.RoleDeveloper})
	require.NoError(t, err)
	assert.True(t, got.Mailed)
	assert.True(t, got.MailSent)

	s := seen.get()
	assert.True(t, s.startTLS)
	assert.Equal(t, "\x00tollgate\x00s3cret-pw", s.auth)
	assert.True(t, s.authOverTLS, "the password goes only after TLS")
	assert.Equal(t, "FROM:<tollgate@example.com>", s.from)
	assert.Equal(t, "TO:<dev@example.org>", s.rcpt)
	head, body, ok := strings.Cut(s.data, "\n\n")
	require.True(t, ok, s.data)
	assert.Contains(t, head, "From: \"Tollgate\" <tollgate@example.com>\n")
	assert.Contains(t, head, "To: <dev@example.org>\n")
	assert.Contains(t, head, "Subject: Invitation to join owner@mail.example.com on Tollgate\n")
	text, err := io.ReadAll(quotedprintable.NewReader(strings.NewReader(body)))
	require.NoError(t, err)
	assert.Contains(t, string(text), "https://tg.example.com/invitations/"+got.Secret)
	assert.Contains(t, string(text), "owner@mail.example.com invites you")
	assert.Contains(t, string(text), "as developer")
	assert.Contains(t, string(text), got.Invitation.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
}

func TestThePasswordIsNeverSentInClear(t *testing.T) {
	port, seen := smtpServer(t, nil) // no STARTTLS offered
	for _, mode := range []string{config.StartTLSAuto, config.StartTLSNever, config.StartTLSAlways} {
		t.Run(mode, func(t *testing.T) {
			err := smtpMailer(port, mode, nil).SendInvitation(context.Background(),
				InvitationMail{To: "dev@example.org", Account: "a@example.org", Role: "viewer", Secret: "tg_inv_x"})
			require.Error(t, err)
			assert.NotContains(t, err.Error(), "s3cret-pw")
			assert.Empty(t, seen.get().auth, "no AUTH without TLS")
			assert.Empty(t, seen.get().data)
		})
	}
}

func TestAMailWithoutCredentialsMayGoInClearWhenTLSIsNever(t *testing.T) {
	port, seen := smtpServer(t, nil)
	m := smtpMailer(port, config.StartTLSNever, nil)
	m.Config.Username, m.Config.Password = "", ""
	require.NoError(t, m.SendInvitation(context.Background(), InvitationMail{To: "dev@example.org", Account: "a@example.org", Role: "viewer", Secret: "tg_inv_x"}))
	assert.Contains(t, seen.get().data, "tg_inv_x")
}

func TestAMailServerThatNeverAnswersLeavesTheInvitationValid(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	held := make(chan net.Conn, 1)
	go func() { // accepts and says nothing
		if c, err := ln.Accept(); err == nil {
			held <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		select {
		case c := <-held:
			c.Close()
		default:
		}
	})
	m := smtpMailer(ln.Addr().(*net.TCPAddr).Port, config.StartTLSAuto, nil)
	m.Timeout = 300 * time.Millisecond
	e, svc := mailingEnv(t, m)
	tm := e.newTeam(t, "slow.example.com")
	start := time.Now()
	got, err := svc.Invite(context.Background(), tm.actors[store.RoleOwner],
		InviteRequest{AccountID: tm.account.ID, Email: "dev@example.org", Role: store.RoleViewer})
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second, "bounded by the mailer's timeout")
	assert.True(t, got.Mailed)
	assert.False(t, got.MailSent)
	inv, err := svc.Invitation(context.Background(), got.Secret)
	require.NoError(t, err, "the invitation stays valid")
	assert.Equal(t, got.Invitation.ID, inv.ID)
}

// countingMailer counts the mails it is asked to send.
type countingMailer struct{ n int }

func (c *countingMailer) SendInvitation(context.Context, InvitationMail) error {
	c.n++
	return nil
}

func TestAHostileEmailIsRefusedBeforeAnyMail(t *testing.T) {
	m := &countingMailer{}
	e, svc := mailingEnv(t, m)
	tm := e.newTeam(t, "hostile.example.com")
	for _, email := range []string{"dev@example.org\r\nBcc: all@example.org", "dev@example.org\nSubject: x", "a@example.org,b@example.org",
		"<a@example.org>", "dev@example.org\x00"} {
		_, err := svc.Invite(context.Background(), tm.actors[store.RoleOwner], InviteRequest{AccountID: tm.account.ID, Email: email, Role: store.RoleViewer})
		var oe oaierror.Error
		require.True(t, errors.As(err, &oe), "%q: %v", email, err)
		assert.Equal(t, "email", oe.Param, email)
	}
	assert.Zero(t, m.n, "no mail was tried")

	_, err := (&SMTPMailer{Config: config.SMTP{From: "tg@example.com"}}).message(InvitationMail{To: "dev@example.org\r\nBcc: x@example.org"})
	assert.Error(t, err, "the mailer refuses it too")
}

func TestTheSubjectCannotCarryAHeader(t *testing.T) {
	msg, err := (&SMTPMailer{Config: config.SMTP{From: "tg@example.com"}}).message(
		InvitationMail{To: "dev@example.org", Account: "acme\r\nBcc: x@example.org", Role: "viewer"})
	require.NoError(t, err)
	head, _, _ := strings.Cut(string(msg), "\r\n\r\n")
	assert.NotContains(t, head, "\r\nBcc:")
}

func TestMailerForIsNilWithoutSMTP(t *testing.T) {
	assert.Nil(t, MailerFor(&config.Config{}), "an untyped nil: Invite then sends nothing")
	m := MailerFor(&config.Config{SMTP: &config.SMTP{Host: "mail.example.com", Port: 587, From: "tg@example.com"},
		Dashboard: config.Dashboard{PublicURL: "https://tg.example.com"}})
	require.IsType(t, &SMTPMailer{}, m)
	assert.Equal(t, "https://tg.example.com", m.(*SMTPMailer).PublicURL)
}
