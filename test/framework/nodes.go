package framework

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cloudapi "k8s.io/cloud-provider/api"
)

// RegisterNode creates a Node the way a kubelet with
// --cloud-provider=external does: with the uninitialized taint, then its
// status NotReady (its runtime and pod network are not up yet), then, if
// ready, Ready.
func RegisterNode(ctx context.Context, client kubernetes.Interface, name, providerID string, ready bool, addresses []v1.NodeAddress) error {
	return RegisterNodeObject(ctx, client, KubeletNode(name, providerID), ready, addresses)
}

// KubeletNode is a Node as a kubelet with --cloud-provider=external
// creates it, before its first status.
func KubeletNode(name, providerID string) *v1.Node {
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodeSpec{
			ProviderID: providerID,
			Taints: []v1.Taint{{
				Key: cloudapi.TaintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule,
			}},
		},
	}
}

// RegisterNodeObject is RegisterNode for a Node made by KubeletNode and
// changed, e.g. annotated with the kubelet's --node-ip.
func RegisterNodeObject(ctx context.Context, client kubernetes.Interface, node *v1.Node, ready bool, addresses []v1.NodeAddress) error {
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Node %s: %w", node.Name, err)
	}
	if err := SetNodeStatus(ctx, client, node.Name, false, addresses); err != nil || !ready {
		return err
	}
	return SetNodeStatus(ctx, client, node.Name, true, nil)
}

// SetNodeStatus does what a kubelet's status update does: it sets the
// Ready condition and, unless addresses is nil, the addresses.
func SetNodeStatus(ctx context.Context, client kubernetes.Interface, name string, ready bool, addresses []v1.NodeAddress) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		status := v1.ConditionFalse
		if ready {
			status = v1.ConditionTrue
		}
		now := metav1.Now()
		node.Status.Conditions = []v1.NodeCondition{{
			Type: v1.NodeReady, Status: status, Reason: "KubeletStatus", LastHeartbeatTime: now, LastTransitionTime: now,
		}}
		if addresses != nil {
			node.Status.Addresses = addresses
		}
		_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("updating the status of Node %s: %w", name, err)
	}
	return nil
}

// CreateNode registers a Node (see RegisterNode) and deletes it when the
// test ends.
func CreateNode(t testing.TB, client kubernetes.Interface, name, providerID string, ready bool, addresses []v1.NodeAddress) {
	t.Helper()
	CreateNodeObject(t, client, KubeletNode(name, providerID), ready, addresses)
}

// CreateNodeObject is CreateNode for a Node made by KubeletNode and changed.
func CreateNodeObject(t testing.TB, client kubernetes.Interface, node *v1.Node, ready bool, addresses []v1.NodeAddress) {
	t.Helper()
	name := node.Name
	if err := RegisterNodeObject(context.Background(), client, node, ready, addresses); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting Node %s: %v", name, err)
		}
	})
}
