package config

import "errors"

// SkippedLayer is a config layer file that exists but does not load, which
// Load left out while loading the other layers (Config.Skipped).
type SkippedLayer struct {
	// Layer is the file's layer: LayerUser, LayerProject, LayerLocal, or
	// the Name of a host's Layer.
	Layer string
	// File is the file as named to the loader.
	File string
	// Errors are the problems found in File, each a *Error with
	// File set; never empty.
	Errors []*Error
}

// Err returns the problems as one error (errors.Join of Errors), for
// errors.As and for a message that names the file and each problem.
func (s SkippedLayer) Err() error {
	errs := make([]error, len(s.Errors))
	for i, e := range s.Errors {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// skip records that the file of layer l does not load, for errs.
func (c *Config) skip(l layerFile, errs ...*Error) {
	c.Skipped = append(c.Skipped, SkippedLayer{Layer: l.layer, File: l.path, Errors: errs})
}
