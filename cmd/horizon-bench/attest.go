package main

import "github.com/urfave/cli/v2"

// attestCommand: placeholder, implemented in this file by its owner.
func attestCommand() *cli.Command {
	return &cli.Command{Name: "attest", Hidden: true, Action: func(*cli.Context) error { return usageError("attest: not built yet") }}
}
