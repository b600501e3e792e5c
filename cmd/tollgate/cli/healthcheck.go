package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runHealthcheck asks a health URL (the admin listener's /readyz or
// /healthz) and succeeds on a 200: a container healthcheck for images
// without curl.
func runHealthcheck(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) != 1 {
		return usagef("healthcheck: give the URL, e.g. tollgate healthcheck http://127.0.0.1:9464/readyz")
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return usagef("healthcheck: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s: %s %s", args[0], resp.Status, body)
	}
	_, err = fmt.Fprintf(stdout, "%s", body)
	return err
}
