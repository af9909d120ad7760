package main

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// apiServerWait is how long the CCM waits, before starting, for the API
// server to answer at the address it will use.
const apiServerWait = 2 * time.Minute

// waitForAPIServer returns once the API server answers at the address the
// framework will use (any HTTP answer, even a refusal, is an answer), or
// after timeout. The CCM in the host's network reaches it through the
// kubernetes Service's ClusterIP (in-cluster config), which works only once
// the node's kube-proxy has programmed it: while kube-proxy starts, it
// rejects the connection, and the framework's first request (the
// authentication ConfigMap) would fail and end the process, to be restarted
// by the kubelet a few times during an install. Waiting here makes that a
// log line instead. After timeout the framework goes on and reports its own
// error.
func waitForAPIServer(ctx context.Context, master, kubeconfig string, timeout time.Duration) {
	cfg, err := clientcmd.BuildConfigFromFlags(master, kubeconfig)
	if err != nil {
		return // the framework reports a bad kubeconfig itself
	}
	cfg.Timeout = 5 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	delay := 250 * time.Millisecond
	for {
		_, err := client.Discovery().RESTClient().Get().AbsPath("/version").DoRaw(ctx)
		var status apierrors.APIStatus
		if err == nil || errors.As(err, &status) {
			return
		}
		klog.InfoS("Waiting for the API server to answer before starting", "host", cfg.Host, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 4*time.Second)
	}
}
