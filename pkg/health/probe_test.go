package health

import (
	"bufio"
	"context"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// node serves canned answers on loopback, as whatever may listen on a
// node's health port: each request is read to its blank line and answered
// with answer, a byte at a time (an answer split over reads is whole);
// with closeAfter the connection is then closed.
type node struct {
	l        net.Listener
	accepted atomic.Int32
}

func serve(t *testing.T, answer string, closeAfter bool) *node {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.accepted.Add(1)
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					for {
						line, err := r.ReadString('\n')
						if err != nil {
							return
						}
						if line == "\r\n" {
							break
						}
					}
					for i := range len(answer) {
						if _, err := c.Write([]byte{answer[i]}); err != nil {
							return
						}
					}
					if closeAfter {
						return
					}
				}
			}()
		}
	}()
	return n
}

func (n *node) addr() netip.AddrPort { return netip.MustParseAddrPort(n.l.Addr().String()) }

func get(p *prober, ap netip.AddrPort) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return p.get(ctx, ap, "/healthz")
}

// TestAnswers: what a node answers on its health port is the node's to
// write. Only a 200 in an HTTP/1.x status line within the first 128 bytes
// passes; a connection is kept for the next probe only when its answer was
// read whole, framed by a Content-Length of at most 4 KiB.
func TestAnswers(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		err          string // "" passes
		kept         bool
	}{
		{"kube-proxy", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", "", true},
		{"no reason", "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", "", true},
		{"draining", "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n", "status 503", false},
		{"a redirect", "HTTP/1.1 302 Found\r\nLocation: http://169.254.169.254/\r\nContent-Length: 0\r\n\r\n", "status 302", false},
		{"HTTP/2", "HTTP/2 200\r\n\r\n", "not HTTP/1.x", false},
		{"four digits", "HTTP/1.1 2000 OK\r\n\r\n", "not HTTP/1.x", false},
		{"not a number", "HTTP/1.1 2x0 OK\r\n\r\n", "not a number", false},
		{"another protocol", "SSH-2.0-OpenSSH_9.2\r\n", "not HTTP/1.x", false},
		{"cut short", "HTTP/1.1 200 OK", "closed before a status line", false},
		{"nothing", "", "closed before a status line", false},
		{"a long status line", "HTTP/1.1 200 " + strings.Repeat("O", 200) + "\r\n\r\n", "no status line in the first 128 bytes", false},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "", false},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", "", false},
		{"two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n", "", false},
		{"a long body", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("a", 5000), "", false},
		{"long headers", "HTTP/1.1 200 OK\r\nX-Pad: " + strings.Repeat("a", 5000) + "\r\nContent-Length: 0\r\n\r\n", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := serve(t, c.answer, c.answer == "" || !c.kept)
			p := newProber()
			defer p.forget(nil)
			err := get(p, n.addr())
			if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
				t.Errorf("probe: %v, want %q", err, c.err)
			}
			if kept := p.idle[n.addr()] != nil; kept != c.kept {
				t.Errorf("connection kept: %v, want %v", kept, c.kept)
			}
		})
	}
}

// TestConnectionReuse: probes share a connection until it is
// FreshConnectionEvery old; one the node closed meanwhile (its idle
// timeout) is retried on a new one without failing the probe.
func TestConnectionReuse(t *testing.T) {
	const ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
	n := serve(t, ok, false)
	p := newProber()
	defer p.forget(nil)
	for range 5 {
		if err := get(p, n.addr()); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.accepted.Load(); got != 1 {
		t.Errorf("5 probes made %d connections, want 1", got)
	}
	p.idle[n.addr()].dialled = time.Now().Add(-FreshConnectionEvery)
	if err := get(p, n.addr()); err != nil {
		t.Fatal(err)
	}
	if got := n.accepted.Load(); got != 2 {
		t.Errorf("a probe on a connection %s old: %d connections in all, want 2", FreshConnectionEvery, got)
	}

	closing := serve(t, ok, true)
	for i := range 3 {
		if err := get(p, closing.addr()); err != nil {
			t.Fatalf("probe %d, the node closing each connection after its answer: %v", i, err)
		}
	}
}

// A node that answers on the connection it has but takes no new one (its
// accept loop stuck, a firewall letting only established flows through)
// fails every probe once its connection is due to be renewed: consecutive
// failures, so it is taken out.
func TestNoNewConnectionsFails(t *testing.T) {
	n := serve(t, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false)
	ap := n.addr()
	p := newProber()
	defer p.forget(nil)
	if err := get(p, ap); err != nil {
		t.Fatal(err)
	}
	n.l.Close() // the connection made stays served
	if err := get(p, ap); err != nil {
		t.Fatalf("on the kept connection: %v", err)
	}
	p.idle[ap].dialled = time.Now().Add(-FreshConnectionEvery)
	for i := range 3 {
		if err := get(p, ap); err == nil {
			t.Fatalf("probe %d after the connection was due: passed, want a failure", i)
		}
	}
}
