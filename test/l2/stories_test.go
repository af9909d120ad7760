package l2

import (
	"fmt"
	"maps"
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

// storyCount is what the replies between two times say.
type storyCount struct {
	// Worst is the most MACs named for one VIP within one second, and
	// Longest the longest run of seconds in which a VIP was named with
	// more than one; Example one such VIP and its MACs.
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
	for _, r := range s.replies {
		if r.at.Before(from) || !r.at.Before(to) {
			continue
		}
		c.Replies++
		if !slices.Contains(c.Replicas[r.vip], r.from) {
			c.Replicas[r.vip] = append(c.Replicas[r.vip], r.from)
		}
		sec := int(r.at.Sub(s.start) / time.Second)
		if names[r.vip] == nil {
			names[r.vip] = map[int][]string{}
		}
		if !slices.Contains(names[r.vip][sec], r.names) {
			names[r.vip][sec] = append(names[r.vip][sec], r.names)
		}
	}
	for vip, bySec := range names {
		run := 0
		for _, sec := range slices.Sorted(maps.Keys(bySec)) {
			macs := bySec[sec]
			if len(macs) > c.Worst {
				c.Worst = len(macs)
			}
			if len(macs) > 1 {
				if bySec[sec-1] != nil && len(bySec[sec-1]) > 1 {
					run++
				} else {
					run = 1
				}
				if d := time.Duration(run) * time.Second; d > c.Longest {
					c.Longest, c.Example = d, fmt.Sprintf("%s named %v in second %d", vip, macs, sec)
				}
			}
		}
	}
	return c
}
