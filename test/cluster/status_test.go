package cluster

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/provider"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// statusPage runs the commands of docs/operations/troubleshooting.md,
// "Where is this VIP, and why": kubectl port-forward to a CCM Pod's
// readiness port, and a GET of /status for a VIP (from a free local port,
// where the page forwards 10263). The answer names the Service, the
// workers as next hops, and the router sent them over a session that took
// ADD-PATH.
func statusPage(t *testing.T, ns string) {
	vip := serviceFor(t, ns, "echo-status", "echo", false)
	workers := nodeIPs(workerNames()...)
	framework.Eventually(t, time.Minute, "the VIP at the router via every worker", func() (bool, string) {
		hops := routerNextHops(vip)
		return slices.Equal(hops, workers), fmt.Sprintf("%s via %v", vip, hops)
	})
	// A Running one: with one control-plane node the second replica is
	// Pending.
	pods, err := lab.Kubectl("-n", "kube-system", "get", "pods", "-l", "app.kubernetes.io/name=baremetal-cloud-controller-manager",
		"--field-selector", "status.phase=Running", "-o", "name")
	if err != nil || strings.TrimSpace(pods) == "" {
		t.Fatalf("the CCM's Pods: %q %v", pods, err)
	}
	pod := strings.Fields(pods)[0]
	local, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	pf := exec.Command(filepath.Join(framework.ToolsBin(), "kubectl"), "--kubeconfig", lab.Kubeconfig,
		"-n", "kube-system", "port-forward", pod, fmt.Sprintf("%d:10263", local))
	out, err := pf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	pf.Stderr = &stderr
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pf.Process.Kill(); pf.Wait() })
	forwarding := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		forwarding <- line
		io.Copy(io.Discard, r)
	}()
	select {
	case line := <-forwarding:
		if !strings.HasPrefix(line, "Forwarding from") {
			t.Fatalf("kubectl port-forward said %q: %s", line, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward did not start: %s", stderr.String())
	}

	var st provider.Status
	framework.Eventually(t, 30*time.Second, "the status page names the VIP's Service, its workers and the router sent them", func() (bool, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/status?vip=%s", local, vip))
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		st = provider.Status{}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || len(st.VIPs) != 1 {
			return false, fmt.Sprintf("%s: %+v %v", resp.Status, st, err)
		}
		v := st.VIPs[0]
		if v.Service != ns+"/echo-status" || !slices.Equal(v.NextHops, workers) || len(v.Routers) != 1 || !slices.Equal(v.Routers[0].NextHops, workers) {
			return false, fmt.Sprintf("%+v, want Service %s/echo-status via %v, sent to the router", v, ns, workers)
		}
		if len(st.Routers) != 1 || st.Routers[0].State != "established" || !st.Routers[0].AddPath {
			return false, fmt.Sprintf("routers %+v, want one, established, with ADD-PATH", st.Routers)
		}
		return true, ""
	})
	t.Logf("%s's status page for %s: %+v, routers %+v", pod, vip, st.VIPs[0], st.Routers)
}
