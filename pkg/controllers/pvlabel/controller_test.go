package pvlabel

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

type zoneLabeler struct{}

func (zoneLabeler) GetLabelsForVolume(_ context.Context, pv *v1.PersistentVolume) (map[string]string, error) {
	if pv.Spec.NFS == nil {
		return nil, nil
	}
	return map[string]string{v1.LabelTopologyZone: "z1", v1.LabelTopologyRegion: "r1"}, nil
}

// startController makes a controller on client's informers and starts
// them; the returned context ends with the test.
func startController(t *testing.T, client *fake.Clientset) (context.Context, *Controller) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(factory.Core().V1().PersistentVolumes(), client, zoneLabeler{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return ctx, c
}

// A unit test of the retry path, which a real API server will not produce
// on demand: conflicts and server errors on update are retried until the
// labels are set.
func TestRetriesFailedUpdates(t *testing.T) {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv", Labels: map[string]string{v1.LabelTopologyZone: "user"}},
		Spec:       v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "nas"}}},
	}
	client := fake.NewClientset(pv)
	var updates atomic.Int32
	client.PrependReactor("update", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		switch updates.Add(1) {
		case 1:
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "persistentvolumes"}, "pv", errors.New("changed"))
		case 2:
			return true, nil, apierrors.NewServiceUnavailable("try later")
		}
		return false, nil, nil
	})
	ctx, c := startController(t, client)
	go c.Run(ctx, 1)

	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		got, err := client.CoreV1().PersistentVolumes().Get(ctx, "pv", metav1.GetOptions{})
		if err == nil && got.Labels[v1.LabelTopologyRegion] == "r1" {
			if got.Labels[v1.LabelTopologyZone] != "user" {
				t.Errorf("the user's zone label was overwritten: %v", got.Labels)
			}
			if n := updates.Load(); n != 3 {
				t.Errorf("%d updates, want 2 failed and 1 good", n)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("labels never set after %d updates", updates.Load())
}

// A volume the controller labelled once is not labelled again, even when a
// label it set was removed since; one it never labelled is.
func TestLabelsOnce(t *testing.T) {
	nfs := v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "nas"}}
	removed := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "removed", Labels: map[string]string{v1.LabelTopologyRegion: "r1"},
			Annotations: map[string]string{LabelledAnnotation: v1.LabelTopologyRegion + "," + v1.LabelTopologyZone}},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: nfs},
	}
	fresh := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}, Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: nfs}}
	client := fake.NewClientset(removed, fresh)
	ctx, c := startController(t, client)
	for _, name := range []string{"removed", "fresh"} {
		if err := c.sync(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := client.CoreV1().PersistentVolumes().Get(ctx, "removed", metav1.GetOptions{})
	if _, ok := got.Labels[v1.LabelTopologyZone]; ok {
		t.Errorf("the zone label removed from a labelled volume was put back: %v", got.Labels)
	}
	got, _ = client.CoreV1().PersistentVolumes().Get(ctx, "fresh", metav1.GetOptions{})
	if got.Labels[v1.LabelTopologyZone] != "z1" || got.Annotations[LabelledAnnotation] != v1.LabelTopologyRegion+","+v1.LabelTopologyZone {
		t.Errorf("the fresh volume: labels %v annotations %v", got.Labels, got.Annotations)
	}
}
