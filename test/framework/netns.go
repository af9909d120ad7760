package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netns"
)

// Netns is a network namespace a test made; every address a data-path test
// uses lives in one.
type Netns struct {
	Name   string
	handle netns.NsHandle
}

// NewNetns creates the namespace with its loopback up.
func NewNetns(name string) (*Netns, error) {
	exec.Command("ip", "netns", "del", name).Run() // a leftover of an aborted run
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ip netns add %s: %w: %s (network namespaces need root)", name, err, out)
	}
	h, err := netns.GetFromName(name)
	if err != nil {
		return nil, fmt.Errorf("opening network namespace %s: %w", name, err)
	}
	n := &Netns{Name: name, handle: h}
	if _, err := n.IP("link", "set", "lo", "up"); err != nil {
		return nil, err
	}
	return n, nil
}

// Delete removes the namespace.
func (n *Netns) Delete() {
	n.handle.Close()
	exec.Command("ip", "netns", "del", n.Name).Run()
}

// IP runs `ip` inside the namespace.
func (n *Netns) IP(args ...string) (string, error) {
	return n.Exec(append([]string{"ip"}, args...)...)
}

// Exec runs a command inside the namespace.
func (n *Netns) Exec(args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.Name}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in %s: %s: %w: %s", n.Name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Do runs fn with the calling thread in the namespace; sockets fn opens stay
// in it.
func (n *Netns) Do(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	if err := netns.Set(n.handle); err != nil {
		return fmt.Errorf("entering %s: %w", n.Name, err)
	}
	defer netns.Set(orig)
	return fn()
}

// Listen opens a listener inside the namespace.
func (n *Netns) Listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.Do(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

// Dial connects from inside the namespace.
func (n *Netns) Dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() (err error) {
		c, err = net.DialTimeout(network, addr, timeout)
		return err
	})
	return c, err
}

// Veth connects two namespaces with a veth pair, giving each end an address
// (CIDR notation; "" for none).
func Veth(a *Netns, aName, aAddr string, b *Netns, bName, bAddr string) error {
	if out, err := exec.Command("ip", "link", "add", aName, "netns", a.Name, "type", "veth", "peer", "name", bName, "netns", b.Name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip link add %s/%s: %w: %s", aName, bName, err, out)
	}
	for _, end := range []struct {
		ns         *Netns
		name, addr string
	}{{a, aName, aAddr}, {b, bName, bAddr}} {
		if end.addr != "" {
			if _, err := end.ns.IP("addr", "add", end.addr, "dev", end.name); err != nil {
				return err
			}
		}
		if _, err := end.ns.IP("link", "set", end.name, "up"); err != nil {
			return err
		}
	}
	return nil
}

// ForwardInto listens on 127.0.0.1 inside the namespace and forwards each
// connection to target as seen from the test process (its own loopback):
// a process in the namespace reaches, say, the test's kube-apiserver.
func (n *Netns) ForwardInto(target string) (int, error) {
	l, err := n.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	go Forward(l, func() (net.Conn, error) { return net.DialTimeout("tcp", target, 5*time.Second) })
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ForwardOutOf listens on the test's own loopback and forwards each
// connection to 127.0.0.1:port inside the namespace: the test, or a
// Prometheus it runs, reaches a process that listens on the namespace's
// loopback. It returns the address to dial.
func (n *Netns) ForwardOutOf(port int) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go Forward(l, func() (net.Conn, error) { return n.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), 5*time.Second) })
	return l.Addr().String(), nil
}

// Forward accepts connections on l until it is closed and joins each to a
// connection dial makes.
func Forward(l net.Listener, dial func() (net.Conn, error)) {
	for {
		in, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := dial()
			if err != nil {
				return
			}
			defer out.Close()
			go io.Copy(out, in)
			io.Copy(in, out)
		}()
	}
}

// FreePortIn is a free loopback TCP port inside the named namespace: a
// port free in the test's own namespace may be taken there.
func FreePortIn(name string) (int, error) {
	h, err := netns.GetFromName(name)
	if err != nil {
		return 0, fmt.Errorf("opening network namespace %s: %w", name, err)
	}
	defer h.Close()
	l, err := (&Netns{Name: name, handle: h}).Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ServeHealthz answers health checks at addr inside the namespace as a
// node's kube-proxy does: 200 on /healthz. Close the server to stop, as a
// node whose kube-proxy stopped.
func (n *Netns) ServeHealthz(addr string) (*http.Server, error) {
	l, err := n.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for health checks in %s: %w", n.Name, err)
	}
	s := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	})}
	go s.Serve(l)
	return s, nil
}

// HTTPClient is a client whose connections are made from inside the
// namespace; a zero timeout is none.
func (n *Netns) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return n.Dial(network, addr, 5*time.Second)
		},
	}}
}

// GetJSON decodes the JSON answer to a GET of url, made from inside the
// namespace.
func (n *Netns) GetJSON(url string, v any) error {
	resp, err := n.HTTPClient(10 * time.Second).Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w: %s", url, err, body)
	}
	return nil
}
