//go:build linux || freebsd || openbsd || netbsd || dragonfly

package secretstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/godbus/dbus/v5"
)

// The freedesktop.org Secret Service API (org.freedesktop.secrets), the
// parts a password store needs: a session, the default collection, items
// found by attributes.
const (
	ssName        = "org.freedesktop.secrets"
	ssPath        = dbus.ObjectPath("/org/freedesktop/secrets")
	ssDefault     = dbus.ObjectPath("/org/freedesktop/secrets/aliases/default")
	ssService     = "org.freedesktop.Secret.Service"
	ssCollection  = "org.freedesktop.Secret.Collection"
	ssItem        = "org.freedesktop.Secret.Item"
	ssPrompt      = "org.freedesktop.Secret.Prompt"
	ssSession     = "org.freedesktop.Secret.Session"
	ssNoPrompt    = dbus.ObjectPath("/")
	ssContentType = "application/octet-stream"

	// attrApp and attrName are the attributes every item of ours has:
	// the service name, and the item's name in the vault.
	attrApp  = "application"
	attrName = "mcpvisor-name"
	// attrSchema is libsecret's schema attribute, for keyring viewers.
	attrSchema = "xdg:schema"
	schema     = "io.github.mcpvisor.Credentials"

	// promptTimeout bounds an unlock prompt (a dialog on a desktop; on a
	// headless machine the service dismisses it at once).
	promptTimeout = 2 * time.Minute
)

// ssSecret is the Secret structure of the API: (oayays).
type ssSecret struct {
	Session     dbus.ObjectPath
	Parameters  []byte
	Value       []byte
	ContentType string
}

// secretService is a vault in the default collection of the Secret
// Service, over its own connection to the session bus. Secrets cross the
// bus in a "plain" session: the bus is the user's own, local socket.
type secretService struct {
	conn       *dbus.Conn
	svc        dbus.BusObject
	session    dbus.ObjectPath
	collection dbus.ObjectPath
	app        string
}

func init() {
	platformBackends = append(platformBackends, backendSpec{
		name: BackendSecretService, auto: true,
		open: func(o Options) (func() (vault, error), error) {
			return func() (vault, error) { return openSecretService(o.DBusAddress, o.Service) }, nil
		},
	})
}

func openSecretService(address, app string) (_ *secretService, err error) {
	var conn *dbus.Conn
	if address != "" {
		conn, err = dbus.Connect(address)
	} else {
		conn, err = dbus.ConnectSessionBus()
	}
	if err != nil {
		return nil, fmt.Errorf("no session bus: %w", err)
	}
	s := &secretService{conn: conn, svc: conn.Object(ssName, ssPath), app: app}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	var out dbus.Variant
	if err := s.svc.Call(ssService+".OpenSession", 0, "plain", dbus.MakeVariant("")).Store(&out, &s.session); err != nil {
		return nil, fmt.Errorf("no Secret Service on the session bus: %w", err)
	}
	var coll dbus.ObjectPath
	if err := s.svc.Call(ssService+".ReadAlias", 0, "default").Store(&coll); err != nil {
		return nil, fmt.Errorf("reading the default collection: %w", err)
	}
	if coll == ssNoPrompt || coll == "" {
		return nil, errors.New("the Secret Service has no default collection")
	}
	s.collection = coll
	locked, err := conn.Object(ssName, coll).GetProperty(ssCollection + ".Locked")
	if err != nil {
		return nil, fmt.Errorf("reading the default collection: %w", err)
	}
	if l, _ := locked.Value().(bool); l {
		if err := s.unlock(coll); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// unlock asks the service to unlock path, answering its prompt (a dialog
// where there is a desktop).
func (s *secretService) unlock(path dbus.ObjectPath) error {
	var unlocked []dbus.ObjectPath
	var prompt dbus.ObjectPath
	if err := s.svc.Call(ssService+".Unlock", 0, []dbus.ObjectPath{path}).Store(&unlocked, &prompt); err != nil {
		return fmt.Errorf("unlocking the keyring: %w", err)
	}
	if prompt == ssNoPrompt {
		return nil
	}
	return s.prompt(prompt)
}

// prompt runs a Secret Service prompt and waits (bounded) for its end.
func (s *secretService) prompt(p dbus.ObjectPath) error {
	if err := s.conn.AddMatchSignal(dbus.WithMatchObjectPath(p), dbus.WithMatchInterface(ssPrompt), dbus.WithMatchMember("Completed")); err != nil {
		return err
	}
	sig := make(chan *dbus.Signal, 4)
	s.conn.Signal(sig)
	defer s.conn.RemoveSignal(sig)
	if err := s.conn.Object(ssName, p).Call(ssPrompt+".Prompt", 0, "").Err; err != nil {
		return fmt.Errorf("keyring prompt: %w", err)
	}
	t := time.NewTimer(promptTimeout)
	defer t.Stop()
	for {
		select {
		case v := <-sig:
			if v.Path != p || len(v.Body) == 0 {
				continue
			}
			if dismissed, _ := v.Body[0].(bool); dismissed {
				return errors.New("the keyring stayed locked (the unlock prompt was dismissed)")
			}
			return nil
		case <-t.C:
			return errors.New("the keyring stayed locked (no answer to the unlock prompt)")
		}
	}
}

// search returns our items with the attributes, unlocking locked ones.
func (s *secretService) search(attrs map[string]string) ([]dbus.ObjectPath, error) {
	attrs[attrApp] = s.app
	var unlocked, locked []dbus.ObjectPath
	if err := s.svc.Call(ssService+".SearchItems", 0, attrs).Store(&unlocked, &locked); err != nil {
		return nil, err
	}
	for _, p := range locked {
		if err := s.unlock(p); err != nil {
			return nil, err
		}
	}
	return append(unlocked, locked...), nil
}

func (s *secretService) get(name string) ([]byte, error) {
	items, err := s.search(map[string]string{attrName: name})
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, errNotFound
	}
	var sec ssSecret
	if err := s.conn.Object(ssName, items[0]).Call(ssItem+".GetSecret", 0, s.session).Store(&sec); err != nil {
		return nil, fmt.Errorf("reading a secret: %w", err)
	}
	return sec.Value, nil
}

func (s *secretService) set(name, label string, value []byte) error {
	props := map[string]dbus.Variant{
		ssItem + ".Label":      dbus.MakeVariant(label),
		ssItem + ".Attributes": dbus.MakeVariant(map[string]string{attrApp: s.app, attrName: name, attrSchema: schema}),
	}
	sec := ssSecret{Session: s.session, Parameters: []byte{}, Value: value, ContentType: ssContentType}
	var item, prompt dbus.ObjectPath
	if err := s.conn.Object(ssName, s.collection).Call(ssCollection+".CreateItem", 0, props, sec, true).Store(&item, &prompt); err != nil {
		return fmt.Errorf("storing a secret: %w", err)
	}
	if prompt != ssNoPrompt {
		return s.prompt(prompt)
	}
	return nil
}

func (s *secretService) remove(name string) error {
	items, err := s.search(map[string]string{attrName: name})
	if err != nil {
		return err
	}
	for _, it := range items {
		var prompt dbus.ObjectPath
		if err := s.conn.Object(ssName, it).Call(ssItem+".Delete", 0).Store(&prompt); err != nil {
			return fmt.Errorf("deleting a secret: %w", err)
		}
		if prompt != ssNoPrompt {
			if err := s.prompt(prompt); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *secretService) names() ([]string, error) {
	items, err := s.search(map[string]string{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range items {
		v, err := s.conn.Object(ssName, it).GetProperty(ssItem + ".Attributes")
		if err != nil {
			return nil, fmt.Errorf("listing secrets: %w", err)
		}
		if attrs, ok := v.Value().(map[string]string); ok && attrs[attrName] != "" {
			out = append(out, attrs[attrName])
		}
	}
	return out, nil
}

func (s *secretService) maxValue() int { return 0 }

func (s *secretService) describe() string {
	return fmt.Sprintf("Secret Service collection %s, application %q", s.collection, s.app)
}

func (s *secretService) close() {
	if s.session != "" {
		_ = s.conn.Object(ssName, s.session).Call(ssSession+".Close", 0).Err
	}
	_ = s.conn.Close()
}
