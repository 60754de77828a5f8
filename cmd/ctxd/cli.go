package main

import "github.com/spf13/cobra"

// addClientCommands adds the verbs that talk to a running server over HTTP.
func addClientCommands(root *cobra.Command) {}
