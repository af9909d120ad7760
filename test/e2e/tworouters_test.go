package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/test/framework"
)

// secondRouter is the address of the second router of a twoRouters site.
const secondRouter = "10.0.0.2"

// twoRouters is the site of docs/network/routers.md with two routers of
// its FRR recipe on the subnet (the page's, and a second at secondRouter
// with its own router ID), a control-plane host, and nodes on one host,
// each a Node with a health check.
type twoRouters struct {
	l          *lab
	r1, r2, cp *framework.Netns
	routers    []*framework.Netns
	frr        map[*framework.Netns]*framework.FRR
	nodes      []*node
}

func newTwoRouters(t *testing.T, short string, nodeCount int) *twoRouters {
	l := newLab(t, short)
	s := &twoRouters{l: l, frr: map[*framework.Netns]*framework.FRR{}}
	s.r1 = l.router("r1", recipeRouter4+"/24")
	s.r2 = l.host(s.r1, "r2", "", secondRouter+"/24")
	s.cp = l.host(s.r1, "cp1", "", recipeCP4+"/24")
	s.routers = []*framework.Netns{s.r1, s.r2}
	s.nodes = l.nodesOnOneHost(s.r1, short, nodeCount)
	recipe, err := framework.MarkdownBlock(recipesPage, "FRR", "frr")
	if err != nil {
		t.Fatal(err)
	}
	s.frr[s.r1] = l.frr(s.r1, recipe.Text)
	s.frr[s.r2] = l.frr(s.r2, strings.Replace(recipe.Text, "bgp router-id "+recipeRouter4, "bgp router-id "+secondRouter, 1))
	return s
}

// inventory is the config's inventory of the site's nodes.
func (s *twoRouters) inventory() string {
	var b strings.Builder
	b.WriteString("inventory:\n  machines:\n")
	for _, n := range s.nodes {
		fmt.Fprintf(&b, "  - name: %s\n    addresses: [{type: InternalIP, address: %s}]\n", n.name, n.ip)
	}
	return b.String()
}
