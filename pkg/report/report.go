// Package report says each problem once while it lasts: a log line and an
// Event on the object a user looks at when it starts, a log line when it
// ends. Producers (the desired state, the announcers) hand it the whole set
// of problems they see now; it keeps what was said, so that "said once" and
// "forgotten when gone" are one mechanism, not a map per case.
package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/klog/v2"
)

// Object is what an Event is recorded on.
type Object struct {
	Kind, Namespace, Name string
}

// Self is the CCM's own Pod: where a user looks for what the CCM says of
// its config, its sessions and its sockets.
var Self = Object{Kind: "Pod"}

// Service, Node name the objects most problems are said on.
func Service(namespace, name string) Object {
	return Object{Kind: "Service", Namespace: namespace, Name: name}
}
func Node(name string) Object { return Object{Kind: "Node", Name: name} }

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Problem is one thing wrong for as long as it lasts.
type Problem struct {
	// Reason is the Event's reason; with Object and Subject, the problem's
	// identity.
	Reason string
	Object Object
	// Subject is what within Object the problem is about (a VIP, an
	// interface); "" for the object itself.
	Subject string
	// Log is the log line said when it starts, with LogValues; Message the
	// Event's text. A problem whose Message changes is said again.
	Log       string
	LogValues []any
	Message   string
	// Resolved is logged when the problem ends while its subject is still
	// there; "" logs nothing.
	Resolved string
	// Normal makes the Event of a one-off (Reporter.Event) Normal, and its
	// log line informational: news, not a problem.
	Normal bool
}

func (p Problem) key() string {
	return p.Reason + "\x00" + p.Object.String() + "\x00" + p.Subject
}

// Sink records an Event on an object; eventType is Warning or Normal.
type Sink func(obj Object, eventType, reason, message string)

// Reporter says problems once. The zero value records no Events.
type Reporter struct {
	// Events records an Event; nil records none.
	Events Sink
	// Quiet is asked before an Event on a Service: every replica derives
	// the same problems, and a Service should hear each thing once (from
	// the leader). nil says everything.
	Quiet func(Object) bool

	mu   sync.Mutex
	said map[string]map[string]Problem // by scope, then by key
}

// Report puts the problems a producer (its scope) sees now in place of
// those it reported last: new ones (or ones whose message changed) are
// said, gone ones forgotten, and logged as resolved when exists says their
// subject is still there (nil: always).
func (r *Reporter) Report(scope string, now []Problem, exists func(Problem) bool) {
	r.mu.Lock()
	if r.said == nil {
		r.said = map[string]map[string]Problem{}
	}
	before := r.said[scope]
	cur := make(map[string]Problem, len(now))
	var say, resolved []Problem
	for _, p := range now {
		k := p.key()
		if _, dup := cur[k]; dup {
			continue
		}
		cur[k] = p
		if old, ok := before[k]; !ok || old.Message != p.Message {
			say = append(say, p)
		}
	}
	for k, p := range before {
		if _, still := cur[k]; !still && p.Resolved != "" && (exists == nil || exists(p)) {
			resolved = append(resolved, p)
		}
	}
	if len(cur) == 0 {
		delete(r.said, scope)
	} else {
		r.said[scope] = cur
	}
	r.mu.Unlock()
	for _, p := range resolved {
		klog.InfoS(p.Resolved, subjectValues(p)...)
	}
	for _, p := range say {
		r.say(p)
	}
}

// Said is what is said now in a scope, by key, for tests and readiness.
func (r *Reporter) Said(scope string) []Problem {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slicesOf(r.said[scope])
}

func slicesOf(m map[string]Problem) []Problem {
	out := make([]Problem, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// Event says a one-off: a change that is news once (a node passing its
// checks again, a refused edit), not a state to remember.
func (r *Reporter) Event(p Problem) { r.say(p) }

func (r *Reporter) say(p Problem) {
	eventType := "Warning"
	if p.Normal {
		eventType = "Normal"
		klog.InfoS(p.Log, append(subjectValues(p), p.LogValues...)...)
	} else {
		klog.ErrorS(nil, p.Log, append(subjectValues(p), p.LogValues...)...)
	}
	if r.Events != nil && (r.Quiet == nil || !r.Quiet(p.Object)) {
		r.Events(p.Object, eventType, p.Reason, p.Message)
	}
}

func subjectValues(p Problem) []any {
	kv := []any{strings.ToLower(p.Object.Kind), objectName(p.Object)}
	if p.Subject != "" {
		kv = append(kv, "subject", p.Subject)
	}
	return kv
}

func objectName(o Object) string {
	if o.Namespace == "" {
		return o.Name
	}
	return fmt.Sprintf("%s/%s", o.Namespace, o.Name)
}

// Gauges are the series of a gauge vector that describe things present
// now: Set gives each its value and deletes the series of things gone, so
// no series outlives what it describes.
type Gauges struct {
	Vec *metrics.GaugeVec

	mu  sync.Mutex
	had map[string][]string
}

// Series is one series' label values and value.
type Series struct {
	Labels []string
	Value  float64
}

// Set makes the series exactly these.
func (g *Gauges) Set(now []Series) {
	g.mu.Lock()
	defer g.mu.Unlock()
	cur := make(map[string][]string, len(now))
	for _, s := range now {
		cur[strings.Join(s.Labels, "\x00")] = s.Labels
		g.Vec.WithLabelValues(s.Labels...).Set(s.Value)
	}
	for k, labels := range g.had {
		if _, ok := cur[k]; !ok {
			g.Vec.DeleteLabelValues(labels...)
		}
	}
	g.had = cur
}
