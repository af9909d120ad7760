package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestWaitForAPIServer: the CCM starts as soon as the API server answers,
// whatever it answers, and waits while nothing does, up to its limit.
func TestWaitForAPIServer(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int           // what the server answers /version
		upAfter  time.Duration // when it starts listening; -1: never
		timeout  time.Duration
		min, max time.Duration // how long the wait may take
	}{
		{name: "answers at once", status: http.StatusOK, timeout: 10 * time.Second, max: time.Second},
		{name: "a refusal is an answer", status: http.StatusUnauthorized, timeout: 10 * time.Second, max: time.Second},
		{name: "a server error is an answer", status: http.StatusServiceUnavailable, timeout: 10 * time.Second, max: time.Second},
		{name: "not listening yet", status: http.StatusOK, upAfter: 1500 * time.Millisecond, timeout: 10 * time.Second, min: 1500 * time.Millisecond, max: 6 * time.Second},
		{name: "never listening: gives up at its limit", status: http.StatusOK, upAfter: -1, timeout: 2 * time.Second, min: 2 * time.Second, max: 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A port that refuses connections until the server takes it.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				w.Write([]byte(`{"major":"1","minor":"37"}`))
			}))
			defer srv.Close()
			start := func() {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				srv.Listener = l
				srv.Start()
			}
			switch {
			case tc.upAfter == 0:
				start()
			case tc.upAfter > 0:
				timer := time.AfterFunc(tc.upAfter, start)
				defer timer.Stop()
			}
			began := time.Now()
			waitForAPIServer(context.Background(), "http://"+addr, "", tc.timeout)
			took := time.Since(began)
			if took < tc.min || took > tc.max {
				t.Errorf("waited %s, want between %s and %s", took, tc.min, tc.max)
			}
		})
	}
}
