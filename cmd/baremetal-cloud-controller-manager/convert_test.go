package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/metallb"
)

// convert-metallb writes the config where -o says, notes on standard
// error; with a refusal it writes nothing and fails.
func TestConvertMetalLB(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump.yaml")
	good := "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: lan, namespace: metallb-system}\nspec: {addresses: [192.168.1.240/28]}\n" +
		"---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l2, namespace: metallb-system}\n"
	if err := os.WriteFile(dump, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "cloud.yaml")
	var stdout, stderr bytes.Buffer
	if err := convertMetalLB(&stdout, &stderr, dump, out, metallb.Options{L2Interface: "eth1"}); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	written, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(written), "interface: eth1") {
		t.Errorf("written %q (%v), want the layer 2 pool on eth1", written, err)
	}

	bad := strings.Replace(good, "kind: L2Advertisement\nmetadata: {name: l2, namespace: metallb-system}\n", "kind: L2Advertisement\nmetadata: {name: l2, namespace: metallb-system}\nspec: {interfaces: [eth1], nodeSelectors: [{matchLabels: {a: b}}]}\n", 1)
	if err := os.WriteFile(dump, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "other.yaml")
	stderr.Reset()
	if err := convertMetalLB(&stdout, &stderr, dump, out2, metallb.Options{}); err == nil {
		t.Error("a refused field converted")
	}
	if !strings.Contains(stderr.String(), "refused: L2Advertisement metallb-system/l2: spec.nodeSelectors") || !strings.Contains(stderr.String(), "nothing written") {
		t.Errorf("standard error %q, want the refusal by resource and field", stderr.String())
	}
	if _, err := os.Stat(out2); err == nil {
		t.Error("a config written despite a refusal")
	}

	// --partial writes the rest and says it was partial.
	stderr.Reset()
	if err := convertMetalLB(&stdout, &stderr, dump, out2, metallb.Options{Partial: true}); !errors.Is(err, errPartial) {
		t.Errorf("--partial with a refusal: %v, want errPartial (exit 2)", err)
	}
	if !strings.Contains(stderr.String(), "refused: L2Advertisement metallb-system/l2: spec.nodeSelectors") || !strings.Contains(stderr.String(), "1 refused and left out; the rest written") {
		t.Errorf("standard error %q, want the refusal and that the rest was written", stderr.String())
	}
	if written, err := os.ReadFile(out2); err != nil || !strings.Contains(string(written), "name: lan") || strings.Contains(string(written), "l2:") {
		t.Errorf("--partial wrote %q (%v), want pool lan without the refused advertisement's layer 2", written, err)
	}
}

// The converted config may hold a BGP password: it is written readable by
// its owner alone, over a file that was readable by all too, and an
// inline password is said to belong in a Secret.
func TestConvertMetalLBWritesPasswordsPrivately(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "dump.yaml")
	peer := "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p, namespace: metallb-system}\nspec: {addresses: [192.0.2.0/28]}\n" +
		"---\napiVersion: metallb.io/v1beta1\nkind: BGPAdvertisement\nmetadata: {name: a, namespace: metallb-system}\n" +
		"---\napiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: tor, namespace: metallb-system}\nspec: {myASN: 64512, peerASN: 64500, peerAddress: 192.0.2.254, password: s3cret}\n"
	if err := os.WriteFile(dump, []byte(peer), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, existing := range []bool{false, true} {
		out := filepath.Join(dir, "cloud.yaml")
		os.Remove(out)
		if existing {
			if err := os.WriteFile(out, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var stdout, stderr bytes.Buffer
		if err := convertMetalLB(&stdout, &stderr, dump, out, metallb.Options{}); err != nil {
			t.Fatalf("%v: %s", err, stderr.String())
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("written over an existing file %v: mode %v, want 0600 (it holds a BGP password)", existing, mode)
		}
		if !strings.Contains(stderr.String(), "spec.password") || !strings.Contains(stderr.String(), "passwordFile") {
			t.Errorf("standard error %q does not say that the inline password belongs in a Secret (peers[].passwordFile)", stderr.String())
		}
	}
}
