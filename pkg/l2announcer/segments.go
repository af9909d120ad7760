package l2announcer

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"

	"k8s.io/klog/v2"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/l2"
	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/report"
)

// listen starts answering on an interface until ctx ends, reporting to a.
func listen(ctx context.Context, iface string, a *Announcer) (Segment, error) {
	r, err := l2.Listen(iface)
	if err != nil {
		return nil, err
	}
	r.OnReply = func(p string) { replies.WithLabelValues(p).Inc() }
	r.OnAnnounce = func(p string) { announcements.WithLabelValues(p).Inc() }
	r.OnLearned = a.Converge
	r.OnConflict = func(ip netip.Addr, macs []net.HardwareAddr) {
		learningConflicts.WithLabelValues(iface).Inc()
		klog.ErrorS(nil, "Conflicting or changing answers for a node's hardware address; keeping what is known", "interface", iface, "address", ip, "answers", macs)
	}
	r.OnSocket = func(protocol string, err error) {
		a.sockets.set(iface, protocol, err != nil)
		if err == nil {
			socketDown.WithLabelValues(iface, protocol).Set(0)
			return
		}
		socketErrors.WithLabelValues(iface, protocol).Inc()
		socketDown.WithLabelValues(iface, protocol).Set(1)
		a.report.Event(report.Problem{Reason: "L2SocketFailed", Object: report.Self,
			Log: "Layer 2 socket failed; opened again", LogValues: []any{"interface", iface, "protocol", protocol, "err", err},
			Message: fmt.Sprintf("reading %s on interface %s failed (%v); its layer 2 VIPs are not answered until it opens again (tried at once, then up to every 5s)", protocol, iface, err)})
	}
	go func() {
		r.Run(ctx)
		for _, p := range []string{l2.ProtocolARP, l2.ProtocolNDP} {
			socketDown.DeleteLabelValues(iface, p)
			a.sockets.forget(iface, p)
		}
	}()
	return r, nil
}

// sockets are the sockets down, by "interface/protocol"; their own lock,
// as the responders report from their goroutines.
type sockets struct {
	mu     sync.Mutex
	isDown map[string]bool
}

func (s *sockets) set(iface, protocol string, down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isDown == nil {
		s.isDown = map[string]bool{}
	}
	s.isDown[iface+"/"+protocol] = down
}

// forget is for a socket whose interface closed.
func (s *sockets) forget(iface, protocol string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.isDown, iface+"/"+protocol)
}

func (s *sockets) down() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.isDown)
}

// reportUnopened says, once per error, which interfaces would not open.
func (a *Announcer) reportUnopened(want map[string]string) {
	a.mu.Lock()
	var problems []report.Problem
	series := make([]report.Series, 0, len(want))
	for iface := range want {
		v := 0.0
		if _, failed := a.failed[iface]; failed {
			v = 1
		}
		series = append(series, report.Series{Labels: []string{iface}, Value: v})
	}
	for _, iface := range slices.Sorted(maps.Keys(a.failed)) {
		err := a.failed[iface]
		problems = append(problems, report.Problem{Reason: "L2NotStarted", Object: report.Self, Subject: iface,
			Log: "Cannot answer ARP and NDP for layer 2 VIPs; tried again every 10s", LogValues: []any{"field", want[iface], "interface", iface, "err", err},
			Message: fmt.Sprintf("%s %q: %v; the VIPs of its pools are not answered until it opens (tried again every %s)", want[iface], iface, err, Retry)})
	}
	a.mu.Unlock()
	a.report.Report("l2-open", problems, nil)
	a.notOpen.Set(series)
}
