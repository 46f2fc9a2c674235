package main

import (
	"fmt"

	"github.com/horizon-runmap/horizon/verifier"
)

// loadSchemas returns the schema set to validate with: the schemas embedded
// in this binary, or the *.json files of dir.
func loadSchemas(dir string) (verifier.SchemaSet, error) {
	if dir == "" {
		s, err := verifier.EmbeddedSchemas()
		if err != nil {
			return nil, fmt.Errorf("embedded schemas: %w", err)
		}
		return s, nil
	}
	s, err := verifier.LoadSchemaDir(dir)
	if err != nil {
		return nil, fmt.Errorf("--schemas %s: %w", dir, err)
	}
	return s, nil
}
