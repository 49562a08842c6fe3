package state

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// fill sets every field reachable from v: pointers allocated, one element in
// every slice and map, so that an aliasing Clone has something to share.
func fill(v reflect.Value, depth int) {
	if depth > 8 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type() == reflect.TypeFor[*time.Location]() {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Now())) // with a monotonic reading, as a pass's clocks
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte("1")) // a payload is JSON
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k, depth+1)
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint64:
		v.SetUint(1)
	}
}

// shared reports the first path at which a and b share memory.
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() && a.Type() != reflect.TypeFor[*time.Location]() {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
					return p
				}
			}
		}
	case reflect.Slice:
		if a.Len() > 0 && b.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := range min(a.Len(), b.Len()) {
			if p := shared(a.Index(i), b.Index(i), path+"[]"); p != "" {
				return p
			}
		}
	case reflect.Map:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			return path
		}
		for _, k := range a.MapKeys() {
			if p := shared(a.MapIndex(k), b.MapIndex(k), path+"[]"); p != "" {
				return p
			}
		}
	}
	return ""
}

// Clone is equal to its original and shares nothing with it: the decision core
// changes the next state in place, and a shared pointer would change the previous
// one too (which a pass decides against again after each read and sample). Equal
// includes the times' monotonic readings: the wedge clock and the confirmation
// window measure elapsed time across those decisions, not the wall clock's steps.
func TestCloneSharesNothing(t *testing.T) {
	var s State
	fill(reflect.ValueOf(&s).Elem(), 0)
	if s.Pods[""] == nil && len(s.Pods) == 0 {
		t.Fatal("fill left the pods empty")
	}
	c := s.Clone()
	if !reflect.DeepEqual(&s, c) {
		t.Errorf("Clone differs from the original:\n%+v\n%+v", s, *c)
	}
	if p := shared(reflect.ValueOf(&s).Elem(), reflect.ValueOf(c).Elem(), "State"); p != "" {
		t.Errorf("Clone shares %s with the original", p)
	}
}

// A time JSON cannot encode (a backtest's process start exported in ms reads as a
// year past 9999) is copied, not a panic.
func TestCloneUnencodableTime(t *testing.T) {
	far := time.Date(55000, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New()
	s.Pods["u"] = &Pod{LastSeen: far}
	if c := s.Clone(); !c.Pods["u"].LastSeen.Equal(far) {
		t.Errorf("LastSeen %v, want %v", c.Pods["u"].LastSeen, far)
	}
}
