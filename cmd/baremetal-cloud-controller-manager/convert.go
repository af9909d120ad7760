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

// errRefused is convert-metallb's answer once it has printed the refusals;
// errPartial once it has also written the rest (--partial).
var (
	errRefused = errors.New("some of MetalLB's configuration cannot be converted")
	errPartial = errors.New("some of MetalLB's configuration was not converted; the rest is written")
)

// convertMetalLBCommand converts MetalLB's custom resources to the cloud
// config's loadBalancer and bgp sections (docs/migration/metallb.md).
func convertMetalLBCommand() *cobra.Command {
	var in, out string
	var opts metallb.Options
	cmd := &cobra.Command{
		Use:   "convert-metallb -f DUMP.yaml [-o FILE] [--l2-interface IFACE] [--partial]",
		Short: "Convert MetalLB's resources to a cloud config's loadBalancer and bgp sections",
		Long: "convert-metallb reads MetalLB's resources as " +
			"`kubectl get ipaddresspools,bgppeers,bgpadvertisements,l2advertisements,communities,bfdprofiles -A -o yaml` prints them " +
			"(and, in FRR-K8s mode, FRR-K8s's FRRConfigurations, read for the neighbours a site added) " +
			"and writes the cloud config's loadBalancer and bgp sections. Every field is converted, converted with a changed meaning " +
			"(a note on standard error says how) or refused (a line naming the resource and the field, and what to do); with any refusal nothing is written and it exits 1, " +
			"unless --partial: then the rest is written (a resource with a refused field is left out whole) and it exits 2.",
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch err := convertMetalLB(cmd.OutOrStdout(), cmd.ErrOrStderr(), in, out, opts); {
			case errors.Is(err, errPartial):
				os.Exit(2)
			case err != nil:
				os.Exit(1)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&in, "filename", "f", "", "MetalLB's resources (a List or YAML documents); - for standard input")
	cmd.Flags().StringVarP(&out, "output", "o", "", "where to write the cloud config; standard output when left out")
	cmd.Flags().StringVar(&opts.L2Interface, "l2-interface", "", "the control-plane hosts' interface on the layer 2 pools' segment, for L2Advertisements that name none")
	cmd.Flags().BoolVar(&opts.Partial, "partial", false, "write what converts even when something is refused, leaving out each resource with a refused field, and exit 2: the refusals on standard error say what to do before cutting over")
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
	if len(res.Refused) > 0 && !opts.Partial {
		fmt.Fprintf(stderr, "%d refused; nothing written\n", len(res.Refused))
		return errRefused
	}
	if out == "" {
		_, err = stdout.Write(res.Config)
	} else {
		// Readable by its owner alone (it may hold BGP passwords), also
		// when it replaces a file others could read: a new file renamed
		// over it.
		err = writePrivate(out, res.Config)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return err
	}
	if len(res.Refused) > 0 {
		fmt.Fprintf(stderr, "%d refused and left out; the rest written\n", len(res.Refused))
		return errPartial
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
