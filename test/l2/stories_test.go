package l2

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
)

// stories asks, from a station, who has each IPv4 VIP every period by
// broadcast ARP, as a client whose entries expire does, and records every
// reply: the MAC it names for the VIP (its story) and the MAC that sent it
// (the replica that answered).
type stories struct {
	conn  *packet.Conn
	start time.Time
	stop  chan struct{}
	done  sync.WaitGroup

	mu      sync.Mutex
	replies []storyReply
}

type storyReply struct {
	at          time.Time
	vip         netip.Addr
	names, from string
}

func tellStories(st *station, vips []string, period time.Duration) (*stories, error) {
	hw, err := net.ParseMAC(st.mac)
	if err != nil {
		return nil, err
	}
	own := netip.MustParseAddr(st.ip4)
	var targets []netip.Addr
	for _, v := range vips {
		if a := netip.MustParseAddr(v); a.Is4() {
			targets = append(targets, a)
		}
	}
	s := &stories{start: time.Now(), stop: make(chan struct{})}
	if s.conn, err = st.arpSocket(); err != nil {
		return nil, err
	}
	broadcast := net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	var frames [][]byte
	for _, vip := range targets {
		p, err := arp.NewPacket(arp.OperationRequest, hw, own, net.HardwareAddr{0, 0, 0, 0, 0, 0}, vip)
		if err != nil {
			return nil, err
		}
		payload, _ := p.MarshalBinary()
		f, _ := (&ethernet.Frame{Destination: broadcast, Source: hw, EtherType: ethernet.EtherTypeARP, Payload: payload}).MarshalBinary()
		frames = append(frames, f)
	}
	s.done.Add(2)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			for _, f := range frames {
				s.conn.WriteTo(f, &packet.Addr{HardwareAddr: broadcast})
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	go func() {
		defer s.done.Done()
		buf := make([]byte, 1500)
		for {
			n, _, err := s.conn.ReadFrom(buf)
			if err != nil {
				return
			}
			var f ethernet.Frame
			var p arp.Packet
			if f.UnmarshalBinary(buf[:n]) != nil || p.UnmarshalBinary(f.Payload) != nil || p.Operation != arp.OperationReply ||
				!slices.Contains(targets, p.SenderIP) {
				continue
			}
			s.mu.Lock()
			s.replies = append(s.replies, storyReply{at: time.Now(), vip: p.SenderIP, names: p.SenderHardwareAddr.String(), from: f.Source.String()})
			s.mu.Unlock()
		}
	}()
	return s, nil
}

func (s *stories) end() {
	close(s.stop)
	s.conn.Close()
	s.done.Wait()
}

// storyFresh is how old a replica's answer may be and still be its story
// now: it answers every question, asked every 100 ms.
const storyFresh = 250 * time.Millisecond

// storyCount is what the replies between two times say.
type storyCount struct {
	// Worst is the most MACs named for one VIP within one second.
	// Longest is the longest time the replicas told two stories at once:
	// the latest answers of two replicas for a VIP, each to the same or
	// the last question, named different MACs. (A VIP that moves twice
	// in two seconds, both replicas moving together, is named with two
	// MACs in every second of them, and tells one story at a time.)
	// Example is one such VIP and its MACs.
	Worst   int
	Longest time.Duration
	Example string
	// Replicas are the senders of replies, by VIP.
	Replicas map[netip.Addr][]string
	Replies  int
}

// count reads the replies received in [from, to), in one-second windows
// from the start.
func (s *stories) count(from, to time.Time) storyCount {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := storyCount{Replicas: map[netip.Addr][]string{}}
	names := map[netip.Addr]map[int][]string{}
	type told struct {
		names string
		at    time.Time
	}
	latest := map[netip.Addr]map[string]told{} // by VIP, by replica
	since := map[netip.Addr]time.Time{}        // two stories told since
	for _, r := range s.replies {
		if r.at.Before(from) || !r.at.Before(to) {
			continue
		}
		c.Replies++
		if !slices.Contains(c.Replicas[r.vip], r.from) {
			c.Replicas[r.vip] = append(c.Replicas[r.vip], r.from)
		}
		if latest[r.vip] == nil {
			latest[r.vip] = map[string]told{}
		}
		latest[r.vip][r.from] = told{r.names, r.at}
		var now []string
		for _, l := range latest[r.vip] {
			if r.at.Sub(l.at) <= storyFresh && !slices.Contains(now, l.names) {
				now = append(now, l.names)
			}
		}
		if len(now) > 1 {
			if since[r.vip].IsZero() {
				since[r.vip] = r.at
			}
			if d := r.at.Sub(since[r.vip]); d >= c.Longest {
				slices.Sort(now)
				c.Longest, c.Example = d, fmt.Sprintf("%s named %v at once, %s after the start", r.vip, now, r.at.Sub(s.start).Round(time.Millisecond))
			}
		} else {
			since[r.vip] = time.Time{}
		}
		sec := int(r.at.Sub(s.start) / time.Second)
		if names[r.vip] == nil {
			names[r.vip] = map[int][]string{}
		}
		if !slices.Contains(names[r.vip][sec], r.names) {
			names[r.vip][sec] = append(names[r.vip][sec], r.names)
		}
	}
	for _, bySec := range names {
		for _, macs := range bySec {
			c.Worst = max(c.Worst, len(macs))
		}
	}
	return c
}

// TestTwoStoriesAreTimedAtOnce: replicas that move a VIP together twice in
// two seconds tell one story at a time; replicas that disagree for three
// seconds tell two for three seconds.
func TestTwoStoriesAreTimedAtOnce(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 900_000_000, time.UTC)
	vip := netip.MustParseAddr("10.0.0.7")
	// A question every 100 ms, answered by replicas a and b; mac(i, from)
	// is the MAC replica from names after i questions.
	answers := func(n int, mac func(i int, from string) string) *stories {
		s := &stories{start: t0}
		for i := range n {
			at := t0.Add(time.Duration(i) * 100 * time.Millisecond)
			for j, from := range []string{"a", "b"} {
				s.replies = append(s.replies, storyReply{at: at.Add(time.Duration(j) * time.Millisecond), vip: vip, names: mac(i, from), from: from})
			}
		}
		return s
	}
	together := answers(40, func(i int, from string) string {
		// Both move at 1 s and back at 3 s, b 200 ms after a.
		lag := map[string]int{"a": 0, "b": 2}[from]
		if i >= 10+lag && i < 30+lag {
			return "n2"
		}
		return "n1"
	})
	if c := together.count(t0, t0.Add(time.Hour)); c.Longest > 300*time.Millisecond || c.Worst != 2 {
		t.Errorf("moving together: two stories at once for %v (%s), at most %d MACs a second; want 0.2 s and 2", c.Longest, c.Example, c.Worst)
	}
	apart := answers(40, func(i int, from string) string {
		if from == "b" && i >= 5 && i < 35 {
			return "n2"
		}
		return "n1"
	})
	if c := apart.count(t0, t0.Add(time.Hour)); c.Longest < 2900*time.Millisecond {
		t.Errorf("disagreeing for 3 s: two stories at once for %v, want 3 s", c.Longest)
	}
}
