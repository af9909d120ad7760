package l2

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
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
