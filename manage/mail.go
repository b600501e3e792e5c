package manage

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/tollgate/tollgate/config"
)

// Mailer sends an invitation's mail; Invite calls it, when set, after the
// invitation is made.
type Mailer interface {
	SendInvitation(ctx context.Context, m InvitationMail) error
}

// InvitationMail is what an invitation's mail says.
type InvitationMail struct {
	// To is the invitee's address.
	To string
	// Account names the account the invitee is asked to join (its email).
	Account string
	// InvitedBy is the inviter's email, or "" when no person invited
	// (the CLI, an admin token).
	InvitedBy string
	Role      string
	ExpiresAt time.Time
	// Secret is the link's secret (never logged).
	Secret string
}

// DefaultMailTimeout bounds one mail's whole exchange with the server.
const DefaultMailTimeout = 10 * time.Second

// SMTPMailer sends mail through an SMTP server (net/smtp), one
// connection per mail.
type SMTPMailer struct {
	// Config is the server (config.SMTP, validated).
	Config config.SMTP
	// PublicURL is the dashboard's base URL; the link is
	// PublicURL/invitations/{secret}.
	PublicURL string
	// Timeout bounds the dial and the whole exchange; 0 → DefaultMailTimeout.
	Timeout time.Duration
	// TLS is the client's TLS configuration for STARTTLS; nil → the
	// system's roots, ServerName Config.Host.
	TLS *tls.Config
	// Now is the clock of the Date header; nil → time.Now.
	Now func() time.Time
}

// ErrMailInsecure refuses to send the password where the connection is
// not encrypted.
var ErrMailInsecure = errors.New("mail: the server offers no STARTTLS; refusing to send the SMTP password in clear")

// SendInvitation sends m's mail: a dial and the exchange each bounded by
// the timeout (and ctx); STARTTLS when offered (always/never per the
// configuration); AUTH PLAIN only over TLS.
func (s *SMTPMailer) SendInvitation(ctx context.Context, m InvitationMail) error {
	msg, err := s.message(m)
	if err != nil {
		return err
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultMailTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	addr := net.JoinHostPort(s.Config.Host, strconv.Itoa(s.Config.Port))
	conn, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("mail: dial %s: %w", addr, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return fmt.Errorf("mail: deadline: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() }) // a cancelled request ends the exchange
	defer stop()
	if err := s.exchange(conn, m.To, msg); err != nil {
		return fmt.Errorf("mail to %s: %w", addr, err)
	}
	return nil
}

// exchange speaks SMTP on conn: EHLO, STARTTLS, AUTH, MAIL, RCPT, DATA, QUIT.
func (s *SMTPMailer) exchange(conn net.Conn, to string, msg []byte) error {
	c, err := smtp.NewClient(conn, s.Config.Host)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello("localhost"); err != nil {
		return err
	}
	offered, _ := c.Extension("STARTTLS")
	switch {
	case s.Config.StartTLS == config.StartTLSNever:
	case offered:
		tc := s.TLS.Clone()
		if tc == nil {
			tc = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if tc.ServerName == "" {
			tc.ServerName = s.Config.Host
		}
		if err := c.StartTLS(tc); err != nil {
			return fmt.Errorf("starttls: %w", err)
		}
	case s.Config.StartTLS == config.StartTLSAlways:
		return errors.New("the server offers no STARTTLS and smtp.starttls is always")
	}
	if s.Config.Username != "" {
		if _, secure := c.TLSConnectionState(); !secure {
			return ErrMailInsecure
		}
		if err := c.Auth(smtp.PlainAuth("", s.Config.Username, s.Config.Password.Reveal(), s.Config.Host)); err != nil {
			return fmt.Errorf("auth: %w", err)
		}
	}
	from, _ := mail.ParseAddress(s.Config.From) // validated by config
	if err := c.Mail(from.Address); err != nil {
		return err
	}
	if err := c.Rcpt(to); err != nil {
		return err
	}
	w, err := c.Data()
	if err != nil {
		return err
	}
	if _, err := w.Write(msg); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return c.Quit()
}

// mailAddress refuses an address that could break a header or an SMTP
// command (line breaks, controls, angle brackets, more than one address).
func mailAddress(field, s string) (*mail.Address, error) {
	if strings.ContainsFunc(s, notInAddress) {
		return nil, fmt.Errorf("mail: %s %q is not a plain email address", field, s)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s {
		return nil, fmt.Errorf("mail: %s %q is not a plain email address", field, s)
	}
	return a, nil
}

// headerText drops what could end a header (controls) and encodes the
// rest as an RFC 2047 word where it is not plain ASCII.
func headerText(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return mime.QEncoding.Encode("utf-8", s)
}

// message is the mail's headers and plain-text body (quoted-printable).
func (s *SMTPMailer) message(m InvitationMail) ([]byte, error) {
	to, err := mailAddress("recipient", m.To)
	if err != nil {
		return nil, err
	}
	if m.InvitedBy != "" {
		if _, err := mailAddress("inviter", m.InvitedBy); err != nil {
			return nil, err
		}
	}
	from, err := mail.ParseAddress(s.Config.From)
	if err != nil {
		return nil, fmt.Errorf("mail: smtp.from: %w", err)
	}
	var b bytes.Buffer
	b.WriteString("From: " + from.String() + "\r\n")
	b.WriteString("To: " + to.String() + "\r\n")
	b.WriteString("Subject: " + headerText("Invitation to join "+m.Account+" on Tollgate") + "\r\n")
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	b.WriteString("Date: " + now().UTC().Format(time.RFC1123Z) + "\r\n")
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n")
	who := "You are invited"
	if m.InvitedBy != "" {
		who = m.InvitedBy + " invites you"
	}
	qp := quotedprintable.NewWriter(&b)
	fmt.Fprintf(qp, "%s to join the account %q on Tollgate as %s.\r\n\r\n"+
		"Open this link to accept (it works once, until %s):\r\n\r\n%s/invitations/%s\r\n\r\n"+
		"If you did not expect this mail, ignore it.\r\n",
		who, strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, m.Account), m.Role, m.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"), s.PublicURL, m.Secret)
	if err := qp.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// MailerFor is the configuration's mailer (smtp and dashboard.public_url),
// or nil when it has no smtp section.
func MailerFor(cfg *config.Config) Mailer {
	if cfg == nil || cfg.SMTP == nil {
		return nil
	}
	return &SMTPMailer{Config: *cfg.SMTP, PublicURL: cfg.Dashboard.PublicURL}
}
