package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/provider"
)

// readinessOptions is where /readyz and /status are served: plain HTTP,
// for the kubelet's readiness probe and for operators. The chart binds it
// to the node's loopback (host networking), which only the node itself
// reaches, and `kubectl port-forward` for those the API server lets
// forward to the Pod; the secure port's /healthz stays the liveness check.
// (The secure port cannot serve /status to kubectl: the framework builds
// its handlers, and the API server's pod proxy forwards no identity.)
type readinessOptions struct {
	Address        string
	MinEstablished string
}

func (o *readinessOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Address, "readiness-address", o.Address,
		"host:port to serve /readyz and /status on over plain HTTP. /readyz: 200 once this replica's table is derived from the cluster, at least --readiness-min-established of its BGP peers have an established session and every layer 2 interface has its sockets open; 503 with the reason before. /status: where this replica announces each VIP and why not, as JSON (?vip= keeps one). Bind it to loopback. Empty: not served.")
	fs.StringVar(&o.MinEstablished, "readiness-min-established", provider.DefaultMinEstablished.String(),
		"how many of its BGP peers a ready replica has established sessions with: a count (1) or a share of the configured peers, rounded up (50%, 100% for every one); at least one. A router in maintenance is down for every replica alike, and must not make them all unready.")
}

// minEstablished is --readiness-min-established, checked.
func (o *readinessOptions) minEstablished() (intstr.IntOrString, error) {
	v := intstr.Parse(o.MinEstablished)
	if _, err := intstr.GetScaledValueFromIntOrPercent(&v, 100, true); err != nil || (v.Type == intstr.Int && v.IntVal < 1) {
		return v, fmt.Errorf("--readiness-min-established %q is neither a count of at least 1 nor a share such as 50%%", o.MinEstablished)
	}
	return v, nil
}

// serveReadiness serves ready's answer at /readyz and status's at /status
// until the process ends.
func serveReadiness(addr string, ready func() error, status func(vip netip.Addr) any) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--readiness-address: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		var vip netip.Addr
		if q := r.URL.Query().Get("vip"); q != "" {
			var err error
			if vip, err = netip.ParseAddr(q); err != nil {
				http.Error(w, fmt.Sprintf("vip=%q is not an IP address", q), http.StatusBadRequest)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(status(vip))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: 8 << 10}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Serving /readyz stopped", "address", addr)
		}
	}()
	klog.InfoS("Serving readiness and status", "address", "http://"+ln.Addr().String(), "paths", []string{"/readyz", "/status"})
	return nil
}
