package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/mcpvisor/mcpvisor/gateway/access"
)

// loadAccess reads the gateway's access rules and rate limits
// (docs/gateway.md, "Access rules and rate limits"): the file of
// --access-rules when given, else the top-level "access" member of the
// last --config file that has one; nil when there are none. It runs at
// start and at every reload; an error keeps the running rules.
func (c *configFiles) loadAccess(file string) (*access.Policy, error) {
	var data []byte
	from := file
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("--access-rules: %w", err)
		}
		data = b
	} else {
		for _, f := range c.files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // the config loader reports it
			}
			var top map[string]json.RawMessage
			if json.Unmarshal(b, &top) != nil {
				continue
			}
			if raw, ok := top["access"]; ok {
				data, from = raw, f+": access"
			}
		}
	}
	if data == nil {
		return nil, nil
	}
	rules, err := access.Parse(data)
	if err == nil {
		var p *access.Policy
		if p, err = access.Compile(rules); err == nil {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%s: %w", from, err)
}
