package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// EnvoyPath is the Envoy binary: $TOLLGATE_ENVOY, else the one `make
// envoy` installed (its path is in .venv/envoy-path under the repository
// root).
func EnvoyPath(repo string) (string, error) {
	if p := os.Getenv("TOLLGATE_ENVOY"); p != "" {
		return p, nil
	}
	b, err := os.ReadFile(filepath.Join(repo, ".venv", "envoy-path"))
	if err != nil {
		return "", fmt.Errorf("no Envoy: run `make envoy`, or set TOLLGATE_ENVOY=/path/to/envoy: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// EnvoyOptions say how to start one Envoy.
type EnvoyOptions struct {
	Binary    string // the envoy executable
	Bootstrap []byte // the bootstrap, substituted (Bootstrap)
	Dir       string // where the bootstrap and the admin address are written
	LogLevel  string // Envoy's --log-level; default info
	Logs      io.Writer
	// Quick stops Envoy within seconds (no listener drain at exit), as the
	// tests want.
	Quick bool
}

// Envoy is one running Envoy.
type Envoy struct {
	Process
	adminPath string
	// Admin and Listener are http://host:port of the admin listener and
	// of the public listener (known once Ready returned).
	Admin, Listener string
}

// StartEnvoy starts Envoy; it does not wait for it (Ready does).
func StartEnvoy(o EnvoyOptions) (*Envoy, error) {
	bootPath := filepath.Join(o.Dir, "envoy.yaml")
	if err := os.WriteFile(bootPath, o.Bootstrap, 0o600); err != nil {
		return nil, fmt.Errorf("envoy bootstrap: %w", err)
	}
	adminPath := filepath.Join(o.Dir, "envoy-admin-address")
	_ = os.Remove(adminPath) // a stale one from an earlier run is not this Envoy's
	level := o.LogLevel
	if level == "" {
		level = "info"
	}
	args := []string{"-c", bootPath, "--use-dynamic-base-id", "--admin-address-path", adminPath,
		"--concurrency", "1", "--log-level", level}
	if o.Quick {
		args = append(args, "--drain-time-s", "1", "--parent-shutdown-time-s", "2")
	}
	e := &Envoy{adminPath: adminPath}
	if err := e.start("envoy", exec.Command(o.Binary, args...), o.Logs, nil); err != nil {
		return nil, err
	}
	return e, nil
}

// Ready waits until Envoy's admin answers LIVE, its public listener (served
// by Tollgate over xDS) is bound and takes a connection, or d passes.
func (e *Envoy) Ready(ctx context.Context, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		last := e.Probe(ctx, client)
		if last == nil {
			return nil
		}
		select {
		case <-e.Exited():
			return fmt.Errorf("envoy exited: %v", e.Err())
		case <-ctx.Done():
			return fmt.Errorf("envoy not ready within %v: %w", d, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Probe checks once what Ready waits for.
func (e *Envoy) Probe(ctx context.Context, client *http.Client) error {
	if e.Admin == "" {
		b, err := os.ReadFile(e.adminPath)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return errors.New("no admin address yet")
		}
		e.Admin = "http://" + strings.TrimSpace(string(b))
	}
	body, err := Get(ctx, client, e.Admin+"/ready")
	if err != nil {
		return err
	}
	if strings.TrimSpace(body) != "LIVE" {
		return fmt.Errorf("/ready: %s", body)
	}
	if e.Listener == "" {
		addr, err := e.PublicListener(ctx, client)
		if err != nil {
			return err
		}
		e.Listener = "http://" + addr
	}
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", strings.TrimPrefix(e.Listener, "http://"))
	if err != nil {
		return err
	}
	return conn.Close()
}

// PublicListener reads the bound address of the listener "public" from
// the admin's /listeners (it may have been asked for port 0).
func (e *Envoy) PublicListener(ctx context.Context, client *http.Client) (string, error) {
	body, err := Get(ctx, client, e.Admin+"/listeners?format=json")
	if err != nil {
		return "", err
	}
	var ls struct {
		ListenerStatuses []struct {
			Name         string `json:"name"`
			LocalAddress struct {
				SocketAddress struct {
					Address   string `json:"address"`
					PortValue int    `json:"port_value"`
				} `json:"socket_address"`
			} `json:"local_address"`
		} `json:"listener_statuses"`
	}
	if err := json.Unmarshal([]byte(body), &ls); err != nil {
		return "", fmt.Errorf("/listeners: %w", err)
	}
	for _, l := range ls.ListenerStatuses {
		sa := l.LocalAddress.SocketAddress
		if l.Name == "public" && sa.PortValue != 0 {
			return net.JoinHostPort(sa.Address, strconv.Itoa(sa.PortValue)), nil
		}
	}
	return "", fmt.Errorf("no public listener yet: %s", body)
}

// Get reads a URL's body (at most 1 MiB), within 2 s.
func Get(ctx context.Context, client *http.Client, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b), err
}
