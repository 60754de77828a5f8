package main

import "github.com/spf13/cobra"

// addAdminCommands adds the offline verbs that work on a stopped server's data dir.
func addAdminCommands(root *cobra.Command) {}
