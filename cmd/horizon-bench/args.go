package main

import (
	"flag"
	"io"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/horizon-runmap/horizon/campaigns"
	"github.com/horizon-runmap/horizon/contracts"
	"github.com/horizon-runmap/horizon/editions"
)

// positional is a command's one positional argument, for its usage errors.
type positional struct {
	which   string // "campaign": run: which campaign?
	one     string // "campaign file": run takes one campaign file
	example string // a whole example command line
}

// commandFlagSet is a flag set with every flag the command declares (bool
// flags as bools, the rest as strings; cli parses the values afterwards),
// silent: its errors become usage errors.
func commandFlagSet(c *cli.Context) *flag.FlagSet {
	fs := flag.NewFlagSet(c.Command.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, fl := range c.Command.Flags {
		_, isBool := fl.(*cli.BoolFlag)
		for _, n := range fl.Names() {
			if isBool {
				fs.Bool(n, false, "")
			} else {
				fs.String(n, "", "")
			}
		}
	}
	return fs
}

// trailingFlags returns the command's positional argument and parses the
// flags that follow it into the command's own flags: urfave/cli (like
// package flag) stops parsing at the first positional argument, so `run
// campaigns/smoke.yaml --out DIR` would otherwise leave --out unparsed.
// Every flag the command declares is accepted after the argument too, with
// cli's own value parsing (c.Set), so a command reads all its flags through
// c as usual. Every usage problem is a usageError (exit 2).
func trailingFlags(c *cli.Context, p positional) (string, error) {
	name := c.Command.Name
	args := c.Args().Slice()
	if len(args) == 0 {
		return "", usageError("%s: which %s? e.g. %s", name, p.which, p.example)
	}
	fs := commandFlagSet(c)
	if err := fs.Parse(args[1:]); err != nil {
		return "", usageError("%s: %v", name, err)
	}
	if fs.NArg() > 0 {
		return "", usageError("%s takes one %s, got also %q", name, p.one, fs.Args())
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil {
			if e := c.Set(f.Name, f.Value.String()); e != nil {
				err = usageError("%s: invalid value %q for --%s (%v); see %s --help", name, f.Value.String(), f.Name, e, name)
			}
		}
	})
	return args[0], err
}

// residencyEdition refuses, as a usage error, an IFEval or fidelity edition given to a
// command that reads residency editions (PERF-REAL-v1: blocks, decode
// timing, cache counters). An unreadable contract.json is left to the
// command, which names what is wrong.
func residencyEdition(cmd, dir string) error {
	id, err := campaigns.FrozenContractID(filepath.Join(dir, editions.ContractFile))
	if err == nil && contracts.IsIFEval(id) {
		return usageError("%s: %s is an IFEval edition (contract %s); %s reads residency editions (PERF-REAL-v1). Check it with: horizon-verify %s", cmd, dir, id, cmd, dir)
	}
	if err == nil && contracts.IsFidelity(id) {
		return usageError("%s: %s is a paired fidelity edition (contract %s); %s reads residency editions (PERF-REAL-v1). Check it with: horizon-verify %s", cmd, dir, id, cmd, dir)
	}
	return nil
}
