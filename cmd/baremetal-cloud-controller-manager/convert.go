package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/cloud-provider-baremetal/cloud-provider-baremetal/pkg/metallb"
)

// errRefused is convert-metallb's answer once it has printed the refusals.
var errRefused = errors.New("some of MetalLB's configuration cannot be converted")

// convertMetalLBCommand converts MetalLB's custom resources to the cloud
// config's loadBalancer and bgp sections (docs/migration/metallb.md).
func convertMetalLBCommand() *cobra.Command {
	var in, out string
	var opts metallb.Options
	cmd := &cobra.Command{
		Use:   "convert-metallb -f DUMP.yaml [-o FILE] [--l2-interface IFACE]",
		Short: "Convert MetalLB's resources to a cloud config's loadBalancer and bgp sections",
		Long: "convert-metallb reads MetalLB's resources as " +
			"`kubectl get ipaddresspools,bgppeers,bgpadvertisements,l2advertisements,communities,bfdprofiles -A -o yaml` prints them " +
			"and writes the cloud config's loadBalancer and bgp sections. Every field is converted, converted with a changed meaning " +
			"(a note on standard error says how) or refused (a line naming the resource and the field); with any refusal nothing is written and it exits 1.",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if convertMetalLB(cmd.OutOrStdout(), cmd.ErrOrStderr(), in, out, opts) != nil {
				os.Exit(1)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&in, "filename", "f", "", "MetalLB's resources (a List or YAML documents); - for standard input")
	cmd.Flags().StringVarP(&out, "output", "o", "", "where to write the cloud config; standard output when left out")
	cmd.Flags().StringVar(&opts.L2Interface, "l2-interface", "", "the control-plane hosts' interface on the layer 2 pools' segment, for L2Advertisements that name none")
	cmd.MarkFlagRequired("filename")
	return cmd
}

func convertMetalLB(stdout, stderr io.Writer, in, out string, opts metallb.Options) error {
	var data []byte
	var err error
	if in == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(in)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return err
	}
	res, err := metallb.Convert(data, opts)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", in, err)
		return err
	}
	for _, n := range res.Notes {
		fmt.Fprintf(stderr, "changed: %s\n", n)
	}
	for _, r := range res.Refused {
		fmt.Fprintf(stderr, "refused: %s\n", r)
	}
	if len(res.Refused) > 0 {
		fmt.Fprintf(stderr, "%d refused; nothing written\n", len(res.Refused))
		return errRefused
	}
	if out == "" {
		_, err = stdout.Write(res.Config)
		return err
	}
	// Readable by its owner alone (it may hold BGP passwords), also when
	// it replaces a file others could read: a new file renamed over it.
	if err := writePrivate(out, res.Config); err != nil {
		fmt.Fprintln(stderr, err)
		return err
	}
	return nil
}

// writePrivate writes data to path with mode 0600, through a file of its
// own in the same directory renamed over path.
func writePrivate(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
