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
		Long: "validate parses and validates FILE with the CCM's own rules (strict fields, addresses, pools, peers), " +
			"then what the CCM cannot check as it loads a config: that no pool overlaps the pod or Service CIDRs given or holds an address " +
			"of a listed machine or of a peer, that every family of a pool announced over BGP has a peer and every peer is sent something. " +
			"Password and BMC credential files are not read (they are the Secrets of the site, not of the pipeline); a BMC credential file that does not exist here is a warning. " +
			"It prints every problem, one per line, with its field path and line, and exits 1; 0 when the file is valid. " +
			"Warnings (a nodeSelector that matches no machine today, a BMC credential file not here) are printed and do not fail it.",
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
	var warnings []string
	if err != nil {
		problems = append(problems, err.Error())
	} else if cfg, err := config.ParseWithoutSecrets(data); err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	} else {
		errs, warned := cfg.CheckSite(site)
		if errs != nil {
			problems = append(problems, strings.Split(errs.Error(), "\n")...)
		}
		for _, w := range append(warned, cfg.MissingSecretFiles()...) {
			warnings = append(warnings, w.Error())
		}
	}
	for _, w := range warnings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", path, withLine(data, w))
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintf(stderr, "%s: %s\n", path, withLine(data, p))
		}
		return errInvalid
	}
	fmt.Fprintf(stdout, "%s: valid\n", path)
	return nil
}

// withLine puts the line of the field a problem names after its path
// ("bgp.peers[0].address (line 12): ..."), unless it has one.
func withLine(data []byte, problem string) string {
	path, rest, ok := strings.Cut(problem, ": ")
	if !ok || path == "" || strings.Contains(path, " ") || !strings.ContainsAny(path[:1], "abcdefghijklmnopqrstuvwxyz") {
		return problem
	}
	if line := config.Line(data, path); line > 0 {
		return fmt.Sprintf("%s (line %d): %s", path, line, rest)
	}
	return problem
}
