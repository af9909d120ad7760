package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// ownHelp makes a subcommand's help and usage its own: its description,
// usage line and flags. Inherited, the controller manager's would list
// the eighty flags it does not take and none of its own.
func ownHelp(cmd *cobra.Command) {
	usage := func(c *cobra.Command) string {
		return fmt.Sprintf("Usage:\n  %s\n\nFlags:\n%s", c.UseLine(), c.LocalFlags().FlagUsages())
	}
	cmd.SetUsageFunc(func(c *cobra.Command) error {
		fmt.Fprint(c.OutOrStderr(), usage(c))
		return nil
	})
	cmd.SetHelpFunc(func(c *cobra.Command, _ []string) {
		fmt.Fprintf(c.OutOrStdout(), "%s\n\n%s", strings.TrimSpace(c.Long), usage(c))
	})
}

// listCommands adds the subcommands to the root's help, after its usage
// line: the framework's help lists flags only.
func listCommands(root *cobra.Command) {
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		if c != root {
			help(c, args)
			return
		}
		var buf bytes.Buffer
		out := c.OutOrStdout()
		c.SetOut(&buf)
		help(c, args)
		c.SetOut(out)
		text := buf.String()
		var list strings.Builder
		fmt.Fprintf(&list, "\n  %s [command]\n\nCommands:\n", c.Name())
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				fmt.Fprintf(&list, "  %-16s %s\n", sub.Name(), sub.Short)
			}
		}
		fmt.Fprintf(&list, "\nUse \"%s [command] --help\" for a command's own flags.", c.Name())
		at := strings.Index(text, "Usage:")
		if end := strings.Index(text[max(at, 0):], "\n\n"); at >= 0 && end >= 0 {
			text = text[:at+end] + list.String() + text[at+end:]
		} else {
			text += list.String() + "\n"
		}
		fmt.Fprint(out, text)
	})
}
