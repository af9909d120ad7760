// Package speaker tests the BGP speaker (pkg/bgp) against a real gobgpd on
// loopback, by what gobgpd learned. It needs gobgpd (installed from Debian
// when missing, as root).
package speaker

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	. "github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/bgp"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

func startPair(t *testing.T, addPath bool) (*Speaker, *framework.GoBGPD) {
	t.Helper()
	peer := startPeer(t, framework.GoBGPNeighbor{Address: "127.0.0.1", ASN: 64512, AddPath: addPath})
	s, established := startSpeaker(t, peer, "")
	select {
	case <-established:
	case <-time.After(30 * time.Second):
		t.Fatalf("the session to gobgpd did not come up:\n%s", peer.Logs())
	}
	return s, peer
}

func startPeer(t testing.TB, n framework.GoBGPNeighbor) *framework.GoBGPD {
	t.Helper()
	peer, err := framework.StartGoBGPD(t.TempDir(), "gobgpd", "127.0.0.1", 64500, []framework.GoBGPNeighbor{n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Stop)
	return peer
}

// startSpeaker peers with gobgpd; the channel gets a value each time the
// session is established.
func startSpeaker(t testing.TB, peer *framework.GoBGPD, password string) (*Speaker, chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	established := make(chan struct{}, 10)
	s, err := Start(ctx, Config{
		ASN: 64512, RouterID: netip.MustParseAddr("127.0.0.2"),
		Peers: []Peer{{
			Address: netip.MustParseAddr("127.0.0.1"), Port: uint16(peer.Port), ASN: 64500, Password: password,
			HoldTime: 9 * time.Second, Keepalive: 3 * time.Second, ConnectRetry: time.Second,
			IPv4: true, IPv6: true, GracefulRestart: true, RestartTime: 30 * time.Second,
		}},
	}, slog.New(slog.NewTextHandler(t.Output(), nil)), func(st PeerState) {
		if st.Established {
			established <- struct{}{}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background(), false) })
	return s, established
}

func waitRIB(t *testing.T, peer *framework.GoBGPD, family string, want map[string][]string) {
	t.Helper()
	framework.Eventually(t, 20*time.Second, "gobgpd's "+family+" RIB", func() (bool, string) {
		rib, err := peer.RIB(family)
		if err != nil {
			return false, err.Error()
		}
		for p := range rib {
			slices.Sort(rib[p])
		}
		if len(rib) != len(want) {
			return false, fmt.Sprintf("RIB %v, want %v", rib, want)
		}
		for p, nhs := range want {
			if !slices.Equal(rib[p], nhs) {
				return false, fmt.Sprintf("RIB %v, want %v", rib, want)
			}
		}
		return true, ""
	})
}

func vip(prefix string, nextHops ...string) []Announcement {
	a := Announcement{Prefix: netip.MustParsePrefix(prefix)}
	for _, nh := range nextHops {
		a.NextHops = append(a.NextHops, netip.MustParseAddr(nh))
	}
	return []Announcement{a}
}

func TestSpeakerConvergesWithAddPath(t *testing.T) {
	s, peer := startPair(t, true)
	paths := append(vip("192.0.2.10/32", "198.51.100.1", "198.51.100.2", "198.51.100.3"), vip("2001:db8::10/128", "2001:db8:1::1", "2001:db8:1::2")...)
	if _, err := s.SetPaths(paths); err != nil {
		t.Fatal(err)
	}
	waitRIB(t, peer, "ipv4", map[string][]string{"192.0.2.10/32": {"198.51.100.1", "198.51.100.2", "198.51.100.3"}})
	waitRIB(t, peer, "ipv6", map[string][]string{"2001:db8::10/128": {"2001:db8:1::1", "2001:db8:1::2"}})

	// One next hop leaves, a VIP is added, the IPv6 one withdrawn.
	paths = append(vip("192.0.2.10/32", "198.51.100.1", "198.51.100.3"), vip("192.0.2.11/32", "198.51.100.2")...)
	if _, err := s.SetPaths(paths); err != nil {
		t.Fatal(err)
	}
	waitRIB(t, peer, "ipv4", map[string][]string{"192.0.2.10/32": {"198.51.100.1", "198.51.100.3"}, "192.0.2.11/32": {"198.51.100.2"}})
	waitRIB(t, peer, "ipv6", map[string][]string{})
	if n := s.Announced(); n != 3 {
		t.Errorf("Announced() = %d, want 3", n)
	}
	if _, err := s.SetPaths(nil); err != nil {
		t.Fatal(err)
	}
	waitRIB(t, peer, "ipv4", map[string][]string{})
}

func nextHops(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("198.51.%d.%d", 100+i/250, i%250+1))
	}
	slices.Sort(out)
	return out
}

func TestSpeakerSendsEveryNextHop(t *testing.T) {
	s, peer := startPair(t, true)
	// More next hops than a small send-max would let through.
	hops := nextHops(100)
	if _, err := s.SetPaths(vip("192.0.2.30/32", hops...)); err != nil {
		t.Fatal(err)
	}
	waitRIB(t, peer, "ipv4", map[string][]string{"192.0.2.30/32": hops})

	// Past MaxNextHops, the peer gets MaxNextHops of them, the same ones
	// whatever order they come in.
	many := nextHops(MaxNextHops + 45)
	if _, err := s.SetPaths(vip("192.0.2.30/32", many...)); err != nil {
		t.Fatal(err)
	}
	var want []string
	framework.Eventually(t, 20*time.Second, "gobgpd has MaxNextHops of the next hops", func() (bool, string) {
		rib, err := peer.RIB("ipv4")
		want = rib["192.0.2.30/32"]
		slices.Sort(want)
		return err == nil && len(want) == MaxNextHops, fmt.Sprint(len(want), err)
	})
	slices.Reverse(many)
	if _, err := s.SetPaths(vip("192.0.2.30/32", many...)); err != nil {
		t.Fatal(err)
	}
	waitRIB(t, peer, "ipv4", map[string][]string{"192.0.2.30/32": want})
	// Without one of the kept next hops, only it is replaced.
	gone := slices.Index(many, want[0])
	if _, err := s.SetPaths(vip("192.0.2.30/32", slices.Delete(slices.Clone(many), gone, gone+1)...)); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 20*time.Second, "one kept next hop replaced", func() (bool, string) {
		rib, _ := peer.RIB("ipv4")
		got := rib["192.0.2.30/32"]
		changed := slices.DeleteFunc(slices.Clone(got), func(h string) bool { return slices.Contains(want, h) })
		return len(got) == MaxNextHops && len(changed) == 1 && !slices.Contains(got, want[0]), fmt.Sprint(len(got), " ", changed)
	})
}

func TestSpeakerWithoutAddPathSendsOneNextHop(t *testing.T) {
	s, peer := startPair(t, false)
	if _, err := s.SetPaths(vip("192.0.2.20/32", "198.51.100.1", "198.51.100.2")); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 20*time.Second, "one next hop at a peer without ADD-PATH", func() (bool, string) {
		rib, err := peer.RIB("ipv4")
		if err != nil {
			return false, err.Error()
		}
		return len(rib["192.0.2.20/32"]) == 1, fmt.Sprintf("RIB %v", rib)
	})
}

func TestSpeakerMD5Password(t *testing.T) {
	for _, tc := range []struct {
		name, password string
		up             bool
	}{{"right password", "s3cret-key", true}, {"wrong password", "guessed", false}} {
		t.Run(tc.name, func(t *testing.T) {
			peer := startPeer(t, framework.GoBGPNeighbor{Address: "127.0.0.1", ASN: 64512, Password: "s3cret-key"})
			_, established := startSpeaker(t, peer, tc.password)
			wait := 30 * time.Second
			if !tc.up {
				wait = 15 * time.Second
			}
			select {
			case <-established:
				if !tc.up {
					t.Fatal("the session came up with a wrong TCP MD5 password")
				}
			case <-time.After(wait):
				if tc.up {
					t.Fatalf("the session with the right password did not come up:\n%s", peer.Logs())
				}
			}
		})
	}
}
