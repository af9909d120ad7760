package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/config"
)

// errInvalid is validate's answer once it has printed the problems.
var errInvalid = errors.New("the cloud config is not valid")

// validateCommand checks a cloud config as the CCM loads it, plus what only
// the site knows (its pod and Service CIDRs), so that a pipeline refuses a
// bad edit before it reaches a cluster.
func validateCommand() *cobra.Command {
	var path string
	var clusterCIDRs, serviceCIDRs []string
	cmd := &cobra.Command{
		Use:   "validate --cloud-config FILE [--cluster-cidr CIDR,...] [--service-cluster-ip-range CIDR,...]",
		Short: "Check a cloud config as the CCM would load it; exit 1 with every problem by field path",
		Long: "validate parses and validates FILE with the CCM's own rules (strict fields, addresses, pools, peers, " +
			"password files), then checks that no pool overlaps the pod or Service CIDRs given or holds an address of a listed machine. " +
			"It prints every problem, one per line, and exits 1; 0 when the file is valid.",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if validate(cmd.OutOrStdout(), cmd.ErrOrStderr(), path, clusterCIDRs, serviceCIDRs) != nil {
				// Exit here: returned, the error would be logged again
				// by the framework's runner, as if the command had failed.
				os.Exit(1)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "cloud-config", "", "the cloud config file to check")
	cmd.Flags().StringSliceVar(&clusterCIDRs, "cluster-cidr", nil, "the cluster's pod CIDRs (as the CCM's --cluster-cidr), comma-separated")
	cmd.Flags().StringSliceVar(&serviceCIDRs, "service-cluster-ip-range", nil, "the cluster's Service CIDRs (as kube-apiserver's), comma-separated")
	cmd.MarkFlagRequired("cloud-config")
	return cmd
}

func validate(stdout, stderr io.Writer, path string, clusterCIDRs, serviceCIDRs []string) error {
	var problems []string
	site := config.Site{}
	for _, f := range []struct {
		flag   string
		values []string
		into   *[]netip.Prefix
	}{{"--cluster-cidr", clusterCIDRs, &site.ClusterCIDRs}, {"--service-cluster-ip-range", serviceCIDRs, &site.ServiceCIDRs}} {
		for _, v := range f.values {
			p, err := netip.ParsePrefix(strings.TrimSpace(v))
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %q is not a CIDR", f.flag, v))
				continue
			}
			*f.into = append(*f.into, p)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		problems = append(problems, err.Error())
	} else if cfg, err := config.Parse(data); err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	} else if err := cfg.CheckSite(site); err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "%s: %s\n", path, p)
		}
		return errInvalid
	}
	fmt.Fprintf(stdout, "%s: valid\n", path)
	return nil
}
