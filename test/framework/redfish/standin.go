// Package redfish is a Redfish stand-in: an HTTPS service that serves the
// DMTF schema's ServiceRoot, Systems collection, one ComputerSystem with
// a PowerState, and SessionService sessions, as a BMC does. No Redfish
// service installs from the registries this project builds from, so the
// tests ask this one; its faults (slow, 401, 500, truncated JSON, a
// redirect, ...) are the wrong answers real BMCs give.
package redfish

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Fault is a wrong answer the stand-in gives to every request for the
// ComputerSystem (and, for some, to logins).
type Fault string

const (
	None Fault = ""
	// Slow answers after the stand-in's Delay.
	Slow Fault = "slow"
	// Unauthorized refuses every login and every request (401).
	Unauthorized Fault = "401"
	// ServerError answers 500.
	ServerError Fault = "500"
	// Truncated cuts the JSON off in the middle.
	Truncated Fault = "truncated"
	// Redirect sends the client to another place (302), a closed port on
	// loopback, so that a client that follows it stays inside the test.
	Redirect Fault = "redirect"
	// Huge answers more than a megabyte.
	Huge Fault = "huge"
	// HTML answers a login page with 200.
	HTML Fault = "html"
	// NoPowerState answers the system without the property.
	NoPowerState Fault = "no-power-state"
)

// Server is a running stand-in.
type Server struct {
	// URL is https://127.0.0.1:port; CAFile, the PEM of its certificate.
	URL, CAFile        string
	Username, Password string

	srv *httptest.Server

	mu       sync.Mutex
	power    string
	fault    Fault
	delay    time.Duration
	systems  []string
	sessions map[string]string // token -> session id
	logins   int
	logouts  int
	gets     int
}

// New starts a stand-in with one system, "1", powered On; dir holds its
// CA file.
func New(dir string) (*Server, error) {
	s := &Server{Username: "admin", Password: "redfish-password", power: "On", systems: []string{"1"}, sessions: map[string]string{}, delay: 10 * time.Second}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	s.CAFile = filepath.Join(dir, "redfish-ca.pem")
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	if err := os.WriteFile(s.CAFile, cert, 0o600); err != nil {
		s.srv.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the service.
func (s *Server) Close() { s.srv.CloseClientConnections(); s.srv.Close() }

// SetPower sets the system's PowerState, any string (the schema's values
// are On, Off, PoweringOn, PoweringOff, Paused).
func (s *Server) SetPower(state string) { s.mu.Lock(); s.power = state; s.mu.Unlock() }

// SetFault makes every later answer the fault's.
func (s *Server) SetFault(f Fault) { s.mu.Lock(); s.fault = f; s.mu.Unlock() }

// SetDelay is how long a Slow answer waits.
func (s *Server) SetDelay(d time.Duration) { s.mu.Lock(); s.delay = d; s.mu.Unlock() }

// SetSystems makes ids the Systems collection's members.
func (s *Server) SetSystems(ids ...string) { s.mu.Lock(); s.systems = ids; s.mu.Unlock() }

// ExpireSessions ends every session, as a BMC's session timeout does.
func (s *Server) ExpireSessions() { s.mu.Lock(); s.sessions = map[string]string{}; s.mu.Unlock() }

// Counts are the logins, logouts and GETs of systems so far, and the
// sessions open now.
func (s *Server) Counts() (logins, logouts, gets, open int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logins, s.logouts, s.gets, len(s.sessions)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	fault, delay := s.fault, s.delay
	s.mu.Unlock()
	const sessions = "/redfish/v1/SessionService/Sessions"
	switch {
	case r.Method == http.MethodPost && r.URL.Path == sessions:
		if fault == Unauthorized {
			http.Error(w, `{"error":{"code":"Base.1.0.NoValidSession"}}`, http.StatusUnauthorized)
			return
		}
		s.login(w, r)
		return
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, sessions+"/"):
		s.mu.Lock()
		for tok, id := range s.sessions {
			if id == strings.TrimPrefix(r.URL.Path, sessions+"/") && tok == r.Header.Get("X-Auth-Token") {
				delete(s.sessions, tok)
				s.logouts++
			}
		}
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
		return
	case r.URL.Path == "/redfish/v1":
		writeJSON(w, map[string]any{"@odata.id": "/redfish/v1", "Id": "RootService", "RedfishVersion": "1.15.0",
			"Systems": map[string]string{"@odata.id": "/redfish/v1/Systems"}, "SessionService": map[string]string{"@odata.id": "/redfish/v1/SessionService"},
			"Links": map[string]any{"Sessions": map[string]string{"@odata.id": sessions}}})
		return
	}
	s.mu.Lock()
	_, authorised := s.sessions[r.Header.Get("X-Auth-Token")]
	s.mu.Unlock()
	if !authorised || fault == Unauthorized {
		http.Error(w, `{"error":{"code":"Base.1.0.NoValidSession"}}`, http.StatusUnauthorized)
		return
	}
	switch fault {
	case Slow:
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	case ServerError:
		http.Error(w, `{"error":{"code":"Base.1.0.InternalError"}}`, http.StatusInternalServerError)
		return
	case Redirect:
		http.Redirect(w, r, "https://127.0.0.1:1"+r.URL.Path, http.StatusFound)
		return
	case HTML:
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>Login</body></html>")
		return
	}
	s.mu.Lock()
	power, systems := s.power, append([]string(nil), s.systems...)
	s.gets++
	s.mu.Unlock()
	switch {
	case r.URL.Path == "/redfish/v1/Systems":
		members := []map[string]string{}
		for _, id := range systems {
			members = append(members, map[string]string{"@odata.id": "/redfish/v1/Systems/" + id})
		}
		writeJSON(w, map[string]any{"@odata.id": "/redfish/v1/Systems", "Name": "Computer System Collection", "Members@odata.count": len(members), "Members": members})
	case strings.HasPrefix(r.URL.Path, "/redfish/v1/Systems/") && contains(systems, strings.TrimPrefix(r.URL.Path, "/redfish/v1/Systems/")):
		id := strings.TrimPrefix(r.URL.Path, "/redfish/v1/Systems/")
		system := map[string]any{"@odata.id": r.URL.Path, "@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem", "Id": id, "Name": "System " + id,
			"SystemType": "Physical", "Status": map[string]string{"State": "Enabled", "Health": "OK"}, "PowerState": power}
		switch fault {
		case NoPowerState:
			delete(system, "PowerState")
		case Huge:
			system["Oem"] = strings.Repeat("x", 2<<20)
		}
		if fault == Truncated {
			data, _ := json.Marshal(system)
			w.Header().Set("Content-Type", "application/json")
			w.Write(data[:len(data)/2])
			return
		}
		writeJSON(w, system)
	default:
		http.Error(w, `{"error":{"code":"Base.1.0.ResourceMissingAtURI"}}`, http.StatusNotFound)
	}
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	var creds struct{ UserName, Password string }
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&creds); err != nil || creds.UserName != s.Username || creds.Password != s.Password {
		http.Error(w, `{"error":{"code":"Base.1.0.NoValidSession"}}`, http.StatusUnauthorized)
		return
	}
	b := make([]byte, 16)
	rand.Read(b)
	token := hex.EncodeToString(b)
	s.mu.Lock()
	s.logins++
	id := fmt.Sprint(s.logins)
	s.sessions[token] = id
	s.mu.Unlock()
	w.Header().Set("X-Auth-Token", token)
	w.Header().Set("Location", "/redfish/v1/SessionService/Sessions/"+id)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	json.NewEncoder(w).Encode(map[string]string{"@odata.id": "/redfish/v1/SessionService/Sessions/" + id, "Id": id, "UserName": creds.UserName})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	json.NewEncoder(w).Encode(v)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
