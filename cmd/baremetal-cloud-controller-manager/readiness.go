package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// readinessOptions is where /readyz is served: plain HTTP, for the
// kubelet's readiness probe. The chart binds it to the node's loopback
// (host networking), which only the node itself reaches; the secure port's
// /healthz stays the liveness check.
type readinessOptions struct {
	Address string
}

func (o *readinessOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Address, "readiness-address", o.Address,
		"host:port to serve /readyz on over plain HTTP: 200 once this replica's table is derived from the cluster, every configured BGP peer has an established session and, on the leader, every layer 2 interface has its sockets open; 503 with the reason before. Empty: not served.")
}

// serveReadiness serves ready's answer at /readyz until the process ends.
func serveReadiness(addr string, ready func() error) error {
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: 8 << 10}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "Serving /readyz stopped", "address", addr)
		}
	}()
	klog.InfoS("Serving readiness", "address", "http://"+ln.Addr().String()+"/readyz")
	return nil
}
