package mcpvisor

import "github.com/mcpvisor/mcpvisor/actors/admission"

// classOf is the admission class of a server.
func classOf(cfg ServerConfig) admission.Class {
	if cfg.IsLocal() {
		return admission.Local
	}
	return admission.Remote
}

// enqueue puts a server in line for a connect slot (once).
func (r *registry) enqueue(name string, e *serverEntry) {
	r.admission.enqueue(name, e.class, e.h.pid)
}

// dequeue takes a server out of line and frees its slot, if it had one.
func (r *registry) dequeue(name string) {
	r.admission.remove(name)
}

// pump admits queued servers while their class has free slots. A slot
// frees as soon as one connect settles, not when a batch does.
func (r *registry) pump() {
	r.admission.pump()
}

type statsQuery struct {
	reply chan admissionStats
}

func (r *registry) stats() admissionStats {
	st := r.admission.stats()
	return admissionStats{Limit: st.Limit, Running: st.Running, Peak: st.Peak, Queued: st.Queued}
}
