package provider

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/annotations"
)

// Classes are the LoadBalancer Services this CCM serves, by
// spec.loadBalancerClass: those without one unless IgnoreClassLess (the
// upstream default), and those of Class if it is set (as MetalLB's
// --lb-class).
type Classes struct {
	Class           string
	IgnoreClassLess bool
}

// notServed is the class Services this CCM leaves to another controller
// carry in its informers (never written to the cluster).
const notServed = annotations.Prefix + "not-served"

// servedClass marks, in the informers only, a Service of Class shown
// class-less: client-go may transform an object twice (an informer's
// first list does), and the second pass must not take it for a class-less
// Service and hide it. Like the class, it is in both copies any patch is
// computed between, so it is never written.
const servedClass = annotations.Prefix + "served-class"

// Validate says what is wrong with the classes, naming the flags.
func (c Classes) Validate() error {
	if c.Class != "" {
		if msgs := validation.IsQualifiedName(c.Class); len(msgs) > 0 || !strings.Contains(c.Class, "/") {
			return fmt.Errorf("--load-balancer-class %q is not a loadBalancerClass (a label-style key with a domain prefix, e.g. example.com/baremetal)", c.Class)
		}
	}
	if c.IgnoreClassLess && c.Class == "" {
		return fmt.Errorf("--ignore-class-less-services without --load-balancer-class would serve no Service")
	}
	return nil
}

// Serve makes every user of factory's Service informer (the upstream
// service controller and this provider) see the Services this CCM serves
// as class-less and every other LoadBalancer Service with a class. The
// upstream controller serves exactly the class-less ones, so this is the
// framework's seam for a class of our own: it is not copied, and its
// status and finalizer patches are computed between two cached copies, so
// they never carry the rewritten class. The cleanup finalizer stays in
// view: the controller removes it from a Service it does not serve only
// when that Service is deleted or stops being a LoadBalancer, which is
// what lets such a Service go (nothing else removes it). Call it before
// anything asks factory for the Service informer.
func (c Classes) Serve(factory informers.SharedInformerFactory) {
	if c == (Classes{}) {
		return
	}
	factory.InformerFor(&v1.Service{}, func(client kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		inf := coreinformers.NewServiceInformer(client, metav1.NamespaceAll, resync, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		if err := inf.SetTransform(c.transform); err != nil {
			panic(err) // cannot be: the informer is new, not started
		}
		return inf
	})
}

// transform is the view Serve gives of one Service.
func (c Classes) transform(obj any) (any, error) {
	svc, ok := obj.(*v1.Service)
	if !ok || svc.Spec.Type != v1.ServiceTypeLoadBalancer {
		return obj, nil
	}
	switch class := svc.Spec.LoadBalancerClass; {
	case class != nil && c.Class != "" && *class == c.Class:
		svc.Spec.LoadBalancerClass = nil
		if svc.Annotations == nil {
			svc.Annotations = map[string]string{}
		}
		svc.Annotations[servedClass] = c.Class
	case class == nil && c.IgnoreClassLess && svc.Annotations[servedClass] != c.Class:
		other := notServed
		svc.Spec.LoadBalancerClass = &other
	}
	return svc, nil
}
