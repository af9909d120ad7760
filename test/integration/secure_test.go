package integration

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func TestSecurePort(t *testing.T) {
	s := newSite(t, "inventory: {}\n")
	ccm := s.startCCM("ccm")
	base := fmt.Sprintf("https://127.0.0.1:%d", ccm.SecurePort)

	get := func(client *http.Client, path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// The CCM's serving certificate is self-signed.
	anonymous := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

	if code, body := get(anonymous, "/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz: %d %q, want 200 ok", code, body)
	}
	for _, path := range []string{"/metrics", "/configz", "/debug/pprof/"} {
		if code, _ := get(anonymous, path); code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Errorf("anonymous %s: %d, want 401 or 403", path, code)
		}
	}

	// With the API server's admin client certificate (the CCM trusts the
	// cluster's client CA) and RBAC allowing it, /metrics answers.
	if body := metrics(t, ccm); !strings.Contains(body, "baremetal_cloud_config_last_load_successful 1") {
		t.Errorf("/metrics lacks baremetal_cloud_config_last_load_successful 1")
	}
}

func metrics(t *testing.T, ccm *framework.Process) string {
	t.Helper()
	return suite.Metrics(t, ccm)
}
