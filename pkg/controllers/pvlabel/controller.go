// Package pvlabel is the PersistentVolume label controller: it sets the
// zone and region labels that the scheduler's VolumeZone filter reads on
// every PersistentVolume whose storage system the cloud knows.
package pvlabel

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/klog/v2"
)

// LabelledAnnotation marks a PersistentVolume the controller has labelled,
// with the label keys it set. A volume with it is never labelled again: a
// label a user removes afterwards stays removed. Removing the annotation
// asks for the labels again.
const LabelledAnnotation = "baremetal.cloudprovider.io/topology-labelled"

// Controller labels PersistentVolumes with their zone and region.
type Controller struct {
	client  kubernetes.Interface
	lister  corelisters.PersistentVolumeLister
	synced  cache.InformerSynced
	labeler cloudprovider.PVLabeler
	queue   workqueue.TypedRateLimitingInterface[string]
}

// New returns a controller on the shared PersistentVolume informer.
func New(informer coreinformers.PersistentVolumeInformer, client kubernetes.Interface, labeler cloudprovider.PVLabeler) (*Controller, error) {
	c := &Controller{
		client:  client,
		lister:  informer.Lister(),
		synced:  informer.Informer().HasSynced,
		labeler: labeler,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pv-label"},
		),
	}
	// Existing volumes arrive as adds when the informer starts. Of the
	// updates, only one that takes LabelledAnnotation off asks for labels
	// (a volume labelled once carries it, so labels a user removes on
	// purpose stay removed); the others, and resyncs, cost nothing.
	if _, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueue,
		UpdateFunc: func(old, cur any) {
			if labelled(old) && !labelled(cur) {
				c.enqueue(cur)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("watching PersistentVolumes: %w", err)
	}
	return c, nil
}

// labelled reports whether a PersistentVolume carries LabelledAnnotation.
func labelled(obj any) bool {
	m, err := meta.Accessor(obj)
	if err != nil {
		return false
	}
	_, ok := m.GetAnnotations()[LabelledAnnotation]
	return ok
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// EnqueueAll queues every known volume, for when what backs them may have
// changed (a new cloud config).
func (c *Controller) EnqueueAll() {
	pvs, err := c.lister.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, pv := range pvs {
		c.enqueue(pv)
	}
}

// Run labels volumes with the given number of workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()

	klog.InfoS("Starting PersistentVolume label controller")
	defer klog.InfoS("Shutting down PersistentVolume label controller")
	if !cache.WaitForNamedCacheSync("pv-label", ctx.Done(), c.synced) {
		return
	}
	for range workers {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	if err := c.sync(ctx, key); err != nil {
		// Conflicts and API errors: try again later, with back-off.
		klog.ErrorS(err, "Labelling PersistentVolume failed; will retry", "persistentVolume", key)
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

// sync adds the zone and region labels the volume lacks, once. A label
// that is already set, by a user or earlier, is left as it is, and so is a
// volume this controller has labelled before.
func (c *Controller) sync(ctx context.Context, name string) error {
	pv, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, done := pv.Annotations[LabelledAnnotation]; done {
		return nil
	}
	want, err := c.labeler.GetLabelsForVolume(ctx, pv)
	if err != nil {
		return fmt.Errorf("getting labels for PersistentVolume %s: %w", name, err)
	}
	missing := map[string]string{}
	for k, v := range want {
		if have, ok := pv.Labels[k]; !ok {
			missing[k] = v
		} else if have != v {
			klog.V(2).InfoS("Keeping label set on the PersistentVolume", "persistentVolume", name, "label", k, "value", have, "storageValue", v)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	keys := slices.Sorted(maps.Keys(missing))
	updated := pv.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	maps.Copy(updated.Labels, missing)
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	updated.Annotations[LabelledAnnotation] = strings.Join(keys, ",")
	if _, err := c.client.CoreV1().PersistentVolumes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating PersistentVolume %s: %w", name, err)
	}
	klog.InfoS("Labelled PersistentVolume with its topology", "persistentVolume", name, "labels", keys)
	return nil
}
