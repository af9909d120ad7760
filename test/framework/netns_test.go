package framework

import (
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

func TestForwardInto(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("network namespaces need root")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	ns, err := NewNetns("bmtest-fwd")
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Delete()
	port, err := ns.ForwardInto(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		c, err := ns.Dial("tcp", net.JoinHostPort("127.0.0.1", itoa(port)), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) != "hello" {
			t.Fatalf("through the forward: %q", b)
		}
	}
	// The test's own loopback does not have the forward's port: it is in
	// the namespace.
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", itoa(port)), time.Second); err == nil {
		c.Close()
		b := make([]byte, 5)
		n, _ := c.Read(b)
		if string(b[:n]) == "hello" {
			t.Error("the forward listens outside its namespace")
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// An integrated frr.conf's bfd node goes to bfdd, the rest to bgpd.
func TestSplitConfig(t *testing.T) {
	conf := "frr defaults traditional\n!\nbfd\n profile ccm\n  minimum-ttl 253\n !\n!\nrouter bgp 65101\n neighbor CCM bfd profile ccm\n!\n"
	bgpd, bfdd := splitConfig(conf)
	if want := "frr defaults traditional\n!\nrouter bgp 65101\n neighbor CCM bfd profile ccm\n!\n"; bgpd != want {
		t.Errorf("bgpd's:\n%s\nwant:\n%s", bgpd, want)
	}
	if want := "hostname router\nbfd\n profile ccm\n  minimum-ttl 253\n !\n!\n"; bfdd != want {
		t.Errorf("bfdd's:\n%s\nwant:\n%s", bfdd, want)
	}
}
