package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/rs/zerolog"

	"github.com/mcpvisor/mcpvisor"
	"github.com/mcpvisor/mcpvisor/protocol"
)

// conformancePlan is what the conformance client does once connected.
// By default it explores, as a host whose model uses everything would:
// it calls every tool with arguments built from its input schema, reads
// every resource, gets every prompt and lists the skills (without loading
// them: a host loads a skill when it needs it). The suite's context and,
// where nothing else says it, the scenario's name change that.
type conformancePlan struct {
	// calls are the calls to make, in order, instead of calling every
	// tool (the context's toolCalls).
	calls []conformanceCall
	// echoSchema, when set, replaces the tool calls with one call of
	// echoSchema[1] whose argument "schema" is the input schema of tool
	// echoSchema[0], as the pool holds it.
	echoSchema *[2]string
	// loadSkills loads every skill listed, through the supervisor's
	// loading path, and then reads the files each lists.
	loadSkills bool
}

// conformanceScenarioNeeds are the scenarios whose action nothing the
// suite passes says: the server's fixtures are all there is, and they are
// the same for scenarios that expect different actions (a host that must
// not fetch skills ahead of need, and hosts that load a tampered skill).
var conformanceScenarioNeeds = map[string]conformancePlan{
	"json-schema-2020-12-preservation":   {echoSchema: &[2]string{"json_schema_2020_12_tool", "json_schema_echo"}},
	"sep-2640-client-verify-digest":      {loadSkills: true},
	"sep-2640-client-verify-size":        {loadSkills: true},
	"sep-2640-client-verify-frontmatter": {loadSkills: true},
}

// conformancePlanFor returns the plan of run.
func conformancePlanFor(run conformanceRun) conformancePlan {
	p := conformanceScenarioNeeds[run.scenario]
	if len(run.context.ToolCalls) > 0 {
		p.calls = run.context.ToolCalls
	}
	return p
}

// conformanceDriver carries out a plan against the conformance server.
type conformanceDriver struct {
	sup *mcpvisor.Supervisor
	log zerolog.Logger
}

// drive carries out p. Explicit calls must succeed; what exploring does
// is logged, and a tool or prompt that fails is the server's answer, not
// the client's failure.
func (d *conformanceDriver) drive(ctx context.Context, p conformancePlan) error {
	skills, err := d.sup.Skills().List(ctx, conformanceServer)
	if err != nil && !errors.Is(err, mcpvisor.ErrNoSkills) {
		d.log.Warn().Err(err).Msg("listing skills")
	}
	switch {
	case len(p.calls) > 0:
		for _, c := range p.calls {
			if err := d.call(ctx, c.Name, c.Arguments); err != nil {
				return err
			}
		}
	case p.echoSchema != nil:
		if err := d.echoSchema(ctx, p.echoSchema[0], p.echoSchema[1]); err != nil {
			return err
		}
	default:
		d.callEveryTool(ctx)
	}
	d.readEveryResource(ctx, skills)
	d.getEveryPrompt(ctx)
	if p.loadSkills {
		d.loadSkills(ctx, skills)
	}
	return nil
}

func (d *conformanceDriver) tools() []mcpvisor.Tool {
	var out []mcpvisor.Tool
	for _, t := range d.sup.Tools() {
		if t.Server == conformanceServer {
			out = append(out, t)
		}
	}
	return out
}

// call calls the server's tool name with args (nil: none).
func (d *conformanceDriver) call(ctx context.Context, name string, args json.RawMessage) error {
	if args == nil {
		args = json.RawMessage(`{}`)
	}
	res, err := d.sup.CallTool(ctx, mcpvisor.QualifiedName(conformanceServer, name), args)
	if err != nil {
		return fmt.Errorf("tool %s: %w", name, err)
	}
	if res.IsError {
		return fmt.Errorf("tool %s failed: %v", name, res.Content)
	}
	d.log.Info().Str("tool", name).Msg("called")
	return nil
}

func (d *conformanceDriver) callEveryTool(ctx context.Context) {
	for _, t := range d.tools() {
		args := exampleArguments(t.Definition.InputSchema)
		if err := d.call(ctx, t.Definition.Name, args); err != nil {
			d.log.Warn().Err(err).Msg("exploring tools")
		}
	}
}

func (d *conformanceDriver) echoSchema(ctx context.Context, from, to string) error {
	for _, t := range d.tools() {
		if t.Definition.Name == from {
			args, err := json.Marshal(map[string]json.RawMessage{"schema": t.Definition.InputSchema})
			if err != nil {
				return err
			}
			return d.call(ctx, to, args)
		}
	}
	return fmt.Errorf("the server lists no tool %q", from)
}

// readEveryResource reads the listed resources, except the files of
// skills: those are read when a skill is loaded, never ahead of need.
func (d *conformanceDriver) readEveryResource(ctx context.Context, skills []protocol.Skill) {
	resources, _, err := d.sup.Resources().List(conformanceServer)
	if err != nil {
		d.log.Warn().Err(err).Msg("listing resources")
		return
	}
	for _, r := range resources {
		uri := r.Resource.URI
		if slices.ContainsFunc(skills, func(s protocol.Skill) bool { _, ok := s.File(uri); return ok || s.URI == uri }) {
			continue
		}
		if _, err := d.sup.Resources().Read(ctx, conformanceServer, uri); err != nil {
			d.log.Warn().Err(err).Str("uri", uri).Msg("exploring resources")
		}
	}
}

func (d *conformanceDriver) getEveryPrompt(ctx context.Context) {
	prompts, err := d.sup.Prompts().List(conformanceServer)
	if err != nil {
		d.log.Warn().Err(err).Msg("listing prompts")
		return
	}
	for _, p := range prompts {
		args := map[string]string{}
		for _, a := range p.Prompt.Arguments {
			if a.Required {
				args[a.Name] = "example"
			}
		}
		if _, err := d.sup.Prompts().Get(ctx, p.Name, args); err != nil {
			d.log.Warn().Err(err).Str("prompt", p.Prompt.Name).Msg("exploring prompts")
		}
	}
}

// loadSkills loads each skill and reads the other files it lists; content
// that fails verification is refused by the supervisor and goes no
// further.
func (d *conformanceDriver) loadSkills(ctx context.Context, skills []protocol.Skill) {
	for _, s := range skills {
		loaded, err := d.sup.Skills().Load(ctx, conformanceServer, s)
		if err != nil {
			d.log.Warn().Err(err).Str("skill", s.URI).Msg("skill not loaded")
			continue
		}
		for _, f := range s.Resources.Files {
			if f.URI == s.URI {
				continue
			}
			if _, err := loaded.ReadFile(ctx, f.URI); err != nil {
				d.log.Warn().Err(err).Str("file", f.URI).Msg("skill file not used")
			}
		}
	}
}

// exampleArguments builds arguments that satisfy an object schema's
// required properties: each one's default, const, first enum value or
// first example, else a value of its type.
func exampleArguments(schema json.RawMessage) json.RawMessage {
	v := exampleValue(schema, 0)
	if len(v) == 0 || v[0] != '{' {
		return json.RawMessage(`{}`)
	}
	return v
}

func exampleValue(schema json.RawMessage, depth int) json.RawMessage {
	var s struct {
		Type       json.RawMessage            `json:"type"`
		Default    json.RawMessage            `json:"default"`
		Const      json.RawMessage            `json:"const"`
		Enum       []json.RawMessage          `json:"enum"`
		Examples   []json.RawMessage          `json:"examples"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || depth > 8 {
		return json.RawMessage(`null`)
	}
	switch {
	case s.Default != nil:
		return s.Default
	case s.Const != nil:
		return s.Const
	case len(s.Enum) > 0:
		return s.Enum[0]
	case len(s.Examples) > 0:
		return s.Examples[0]
	}
	var typ string
	if json.Unmarshal(s.Type, &typ) != nil {
		var types []string
		_ = json.Unmarshal(s.Type, &types)
		for _, t := range types {
			if t != "null" {
				typ = t
				break
			}
		}
	}
	if typ == "" && s.Properties != nil {
		typ = "object"
	}
	switch typ {
	case "string":
		return json.RawMessage(`"example"`)
	case "integer", "number":
		return json.RawMessage(`1`)
	case "boolean":
		return json.RawMessage(`true`)
	case "array":
		return json.RawMessage(`[]`)
	case "object":
		obj := map[string]json.RawMessage{}
		for _, name := range s.Required {
			obj[name] = exampleValue(s.Properties[name], depth+1)
		}
		b, _ := json.Marshal(obj)
		return b
	}
	return json.RawMessage(`null`)
}
