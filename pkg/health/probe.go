package health

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// FreshConnectionEvery is how long a probe connection is used again before
// a new one is made. Reusing it saves most of a probe's cost (the TCP
// handshake and teardown: 1,000 nodes every 500 ms cost 0.17 cores on new
// connections); making a new one this often still finds a node that
// answers old connections but takes no new ones, as a probe that fails
// drops its connection and the next ones dial anew.
const FreshConnectionEvery = 10 * time.Second

const (
	userAgent = "baremetal-cloud-controller-manager"
	// statusLineMax bounds the status line: "HTTP/1.1 200 OK" and a
	// reason phrase.
	statusLineMax = 128
	// headerMax and bodyMax bound what is read of an answer to keep its
	// connection: kube-proxy's is a few hundred bytes. A longer one is
	// judged by its status line, and its connection closed unread.
	headerMax = 4 << 10
	bodyMax   = 4 << 10
)

// prober makes HTTP/1.1 GETs by hand, not with net/http: a round probes
// every node every interval, and net/http's client, per request, starts
// two goroutines, allocates two 4 KiB buffers and parses every header.
// Whatever answers on a node's port is not trusted: a redirect is never
// followed (it would make the CCM fetch any URL from its own host's
// network) but fails the probe, and at most a bounded answer is read.
type prober struct {
	dialer net.Dialer
	mu     sync.Mutex
	idle   map[netip.AddrPort]*probeConn // a connection kept for the next probe, by node
}

type probeConn struct {
	net.Conn
	dialled time.Time
}

func newProber() *prober {
	// No TCP keepalive: a probe connection is never idle long, and its
	// setsockopt calls are a fifth of a dial's cost.
	return &prober{dialer: net.Dialer{KeepAlive: -1}, idle: map[netip.AddrPort]*probeConn{}}
}

// forget closes the kept connections of nodes no longer probed.
func (p *prober) forget(keep map[netip.AddrPort]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ap, c := range p.idle {
		if !keep[ap] {
			c.Close()
			delete(p.idle, ap)
		}
	}
}

// get is GET path on ap: on the connection kept from the last probe if it
// is younger than FreshConnectionEvery, else on a new one. A kept
// connection the node closed meanwhile (its idle timeout) is retried once
// on a new one; any other failure drops it.
func (p *prober) get(ctx context.Context, ap netip.AddrPort, path string) error {
	p.mu.Lock()
	c := p.idle[ap]
	delete(p.idle, ap)
	p.mu.Unlock()
	if c != nil && time.Since(c.dialled) >= FreshConnectionEvery {
		c.Close()
		c = nil
	}
	if c != nil {
		code, keep, answered, err := p.roundTrip(ctx, c, ap, path)
		if err == nil || answered || ctx.Err() != nil {
			return p.done(ap, c, code, keep, err)
		}
		c.Close()
	}
	conn, err := p.dialer.DialContext(ctx, "tcp", ap.String())
	if err != nil {
		return err
	}
	c = &probeConn{Conn: conn, dialled: time.Now()}
	code, keep, _, err := p.roundTrip(ctx, c, ap, path)
	return p.done(ap, c, code, keep, err)
}

// done keeps the connection of an answer that passed and can be reused,
// and closes any other.
func (p *prober) done(ap netip.AddrPort, c *probeConn, code int, keep bool, err error) error {
	if err == nil && code != 200 {
		// The status code alone: the text after it is the node's to write.
		err = fmt.Errorf("status %d", code)
	}
	if err != nil || !keep {
		c.Close()
		return err
	}
	p.mu.Lock()
	if old := p.idle[ap]; old != nil {
		old.Close()
	}
	p.idle[ap] = c
	p.mu.Unlock()
	return nil
}

// roundTrip sends one request and reads its answer: the status code, and
// whether the connection may carry another request (the whole answer read,
// framed by a Content-Length, not closed by the node). answered says a
// byte of the answer came.
func (p *prober) roundTrip(ctx context.Context, c *probeConn, ap netip.AddrPort, path string) (code int, keep, answered bool, err error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Minute)
	}
	c.SetDeadline(deadline)
	// Ending ctx before its deadline (the checker stopping) unblocks the
	// read.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + ap.String() + "\r\nUser-Agent: " + userAgent + "\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return 0, false, false, err
	}
	// Read until the headers end, the buffer is full, the status line is
	// overlong, or the connection fails; then judge what came, in one
	// place whichever stopped the reading.
	var buf [headerMax]byte
	n, end := 0, -1
	var rerr error
	for end < 0 && n < len(buf) && rerr == nil && (n < statusLineMax || bytes.IndexByte(buf[:statusLineMax], '\n') >= 0) {
		var m int
		m, rerr = c.Read(buf[n:])
		n += m
		end = bytes.Index(buf[:n], []byte("\r\n\r\n"))
	}
	i := bytes.IndexByte(buf[:min(n, statusLineMax)], '\n')
	switch {
	case i >= 0:
	case n >= statusLineMax:
		return 0, false, true, fmt.Errorf("no status line in the first %d bytes of the answer", statusLineMax)
	case rerr == io.EOF:
		return 0, false, n > 0, errors.New("the connection closed before a status line")
	default:
		return 0, false, n > 0, rerr
	}
	if code, err = parseStatus(buf[:i]); err != nil {
		return 0, false, true, err
	}
	if end < 0 || rerr != nil {
		// Headers beyond headerMax, or the node closed the connection:
		// judged, not kept.
		return code, false, true, nil
	}
	length, framed := contentLength(buf[i+1 : end+2])
	if !framed || length > bodyMax {
		return code, false, true, nil
	}
	// The body: what came with the headers, then the rest.
	have := n - (end + 4)
	if have > length {
		return code, false, true, nil // more than it said: not kept
	}
	if have < length {
		if _, err := io.ReadFull(c, buf[:length-have]); err != nil {
			return code, false, true, nil
		}
	}
	return code, true, true, nil
}

// contentLength is the Content-Length of headers, when it frames the body
// and the node keeps the connection: no Transfer-Encoding, no
// "Connection: close", one length.
func contentLength(headers []byte) (int, bool) {
	length, found := -1, false
	for _, line := range bytes.Split(headers, []byte("\r\n")) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n, err := strconv.Atoi(string(value))
			if err != nil || n < 0 || (found && n != length) {
				return 0, false
			}
			length, found = n, true
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			return 0, false
		case bytes.EqualFold(name, []byte("Connection")) && bytes.Contains(bytes.ToLower(value), []byte("close")):
			return 0, false
		}
	}
	return length, found
}

// parseStatus reads "HTTP/1.x NNN[ reason]".
func parseStatus(line []byte) (int, error) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return 0, errors.New("the answer is not HTTP/1.x")
	}
	code := 0
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return 0, errors.New("the answer's status is not a number")
		}
		code = code*10 + int(d-'0')
	}
	return code, nil
}

// httpProbe probes a target's health check URL.
func (c *Checker) httpProbe(ctx context.Context, t Target) error {
	c.mu.Lock()
	port, path, url := c.settings.Port, c.settings.Path, c.settings.URL(t.Addr)
	c.mu.Unlock()
	if err := c.prober.get(ctx, netip.AddrPortFrom(t.Addr, port), path); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
