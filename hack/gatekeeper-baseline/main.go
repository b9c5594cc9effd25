// gatekeeper-baseline runs Gatekeeper's own mutation engine
// (github.com/open-policy-agent/gatekeeper/v3/pkg/mutation, the version pinned in go.mod) on
// mutators and objects given to it, so that outfit can be compared with the real thing: the
// results for a differential test, and the time System.Mutate takes per object.
//
// Mutators are read as a running Gatekeeper reads them: a YAML or JSON stream (several
// documents, `kind: List` allowed) is turned into JSON as kubectl sends it, decoded into the
// versioned typed object (mutations.gatekeeper.sh v1, v1beta1 or v1alpha1) by the apimachinery
// JSON codec, converted to the unversioned type through the scheme as the mutator controllers do
// (pkg/controller/mutators/instances), and built with pkg/mutation/mutators' MutatorFor* and
// System.Upsert. The one thing the API server would have done on the way is done here too: a
// ModifySet without parameters.operation gets the CRD's default, `merge`. `Namespace` documents
// in the stream supply namespace labels. Objects are decoded as the webhook decodes
// request.object (unstructured.Unstructured.UnmarshalJSON), given the request's namespace while
// they are mutated and their own back afterwards (pkg/webhook/mutation.go), and mutated with
// Source=Original.
//
// Usage:
//
//	gatekeeper-baseline mutate -m MUTATORS.yaml [-n NAMESPACE] [-u USER] [-f OBJECTS]
//	    (the request namespace is the object's metadata.namespace, or -n when it has none)
//	    prints every object (YAML or JSON stream; stdin when -f is absent or "-") after
//	    System.Mutate as one line of compact JSON; an error is printed on stderr and exits 1.
//	gatekeeper-baseline serve
//	    the protocol a driver (outfit-loadgen's gatekeeper-compare) speaks: one JSON request per
//	    line on stdin, one JSON response per line on stdout, in order.
//	    (with GATEKEEPER_BASELINE_CPUPROFILE=FILE, writes a CPU profile of the session to FILE)
//	gatekeeper-baseline version
//	    prints the Gatekeeper module version this binary was built with.
//
// The serve protocol. Every response has "ok" (bool) and, when false, "error" (string).
//
//	{"op":"load","yaml":"<mutator and Namespace documents>"}
//	    replaces the loaded mutators with a new System holding these. Response: "mutators"
//	    (count), "namespaces" (count), "load_ms", "conflicts" (IDs of mutators disabled by a
//	    schema conflict, as Gatekeeper disables both sides).
//	{"op":"mutate","object":{...},"namespace":"ns","username":"u","operation":"CREATE"}
//	    Response: "mutated" (System.Mutate's answer), "object" (the object the webhook would
//	    admit: the mutated object, or the input when nothing changed), "mutate_ns" and "cpu_ns"
//	    (wall-clock and process CPU time of that System.Mutate call).
//	{"op":"bench", <the mutate fields>, "min_iters":N, "max_iters":N, "budget_ms":N, "batch":N,
//	 "warmup":N}
//	    times System.Mutate on fresh deep copies of the object. The copies are made outside the
//	    timed region (Mutate works in place, so each call needs its own copy) in batches of
//	    "batch"; the clock runs around each batch of Mutate calls only. Runs at least min_iters
//	    calls, then stops once budget_ms of timed calls have passed or max_iters is reached.
//	    "warmup" untimed calls come first (default none).
//	    Response: "iters", "mutate_ns" (mean wall-clock time per call), "cpu_ns" (mean process
//	    CPU time per call, every thread), "copy_ns" (mean per deep copy, for reference), "mutated" (whether any timed call said it mutated).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"time"

	"github.com/go-logr/logr"
	mutationsunversioned "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	mutationsv1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1"
	mutationsv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1alpha1"
	mutationsv1beta1 "github.com/open-policy-agent/gatekeeper/v3/apis/mutations/v1beta1"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/mutators"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/schema"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"golang.org/x/sys/unix"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

const gatekeeperModule = "github.com/open-policy-agent/gatekeeper/v3"

var (
	scheme = runtime.NewScheme()
	codecs serializer.CodecFactory
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		mutationsv1.AddToScheme, mutationsv1beta1.AddToScheme, mutationsv1alpha1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	codecs = serializer.NewCodecFactory(scheme)
}

// engine is one loaded set of mutators.
type engine struct {
	system     *mutation.System
	namespaces map[string]map[string]string // name -> labels
	mutators   int
	conflicts  []string
}

// readStream splits a YAML or JSON stream into JSON documents, as kubectl reads files (an empty
// document is skipped; `kind: List` is expanded).
func readStream(r io.Reader) ([][]byte, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var docs [][]byte
	for {
		var raw json.RawMessage
		if err := decoder.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return docs, nil
			}
			return nil, err
		}
		trimmed := bytes.TrimSpace(raw)
		if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
			continue
		}
		var head struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(trimmed, &head); err == nil && head.Kind == "List" {
			for _, item := range head.Items {
				docs = append(docs, item)
			}
			continue
		}
		docs = append(docs, trimmed)
	}
}

// mutatorFor decodes one mutations.gatekeeper.sh document as the controllers receive it and
// builds its mutator with Gatekeeper's own constructors.
func mutatorFor(doc []byte) (types.Mutator, error) {
	obj, gvk, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
	if err != nil {
		return nil, err
	}
	switch gvk.Kind {
	case "Assign":
		out := &mutationsunversioned.Assign{}
		if err := scheme.Convert(obj, out, nil); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssign(out)
	case "AssignMetadata":
		out := &mutationsunversioned.AssignMetadata{}
		if err := scheme.Convert(obj, out, nil); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssignMetadata(out)
	case "ModifySet":
		out := &mutationsunversioned.ModifySet{}
		if err := scheme.Convert(obj, out, nil); err != nil {
			return nil, err
		}
		if out.Spec.Parameters.Operation == "" {
			// The CRD's default (+kubebuilder:default=merge), applied by the API server.
			out.Spec.Parameters.Operation = mutationsunversioned.MergeOp
		}
		return mutators.MutatorForModifySet(out)
	case "AssignImage":
		out := &mutationsunversioned.AssignImage{}
		if err := scheme.Convert(obj, out, nil); err != nil {
			return nil, err
		}
		return mutators.MutatorForAssignImage(out)
	}
	return nil, fmt.Errorf("unsupported kind %s", gvk)
}

func load(r io.Reader) (*engine, error) {
	docs, err := readStream(r)
	if err != nil {
		return nil, err
	}
	e := &engine{
		system:     mutation.NewSystem(mutation.SystemOpts{}),
		namespaces: map[string]map[string]string{},
	}
	for i, doc := range docs {
		var head struct {
			APIVersion string            `json:"apiVersion"`
			Kind       string            `json:"kind"`
			Metadata   metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(doc, &head); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if head.Kind == "Namespace" && (head.APIVersion == "v1" || head.APIVersion == "") {
			e.namespaces[head.Metadata.Name] = head.Metadata.Labels
			continue
		}
		m, err := mutatorFor(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d (%s %s): %w", i, head.Kind, head.Metadata.Name, err)
		}
		if err := e.system.Upsert(m); err != nil {
			if !errors.As(err, &schema.ErrConflictingSchema{}) {
				return nil, fmt.Errorf("document %d (%s %s): %w", i, head.Kind, head.Metadata.Name, err)
			}
		}
		e.mutators++
	}
	// Gatekeeper disables both sides of a conflict; list every disabled mutator once, at the end
	// (an early one is only known to conflict once its partner is loaded).
	seen := map[string]bool{}
	for _, doc := range docs {
		obj, gvk, err := codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			continue
		}
		accessor, ok := obj.(metav1.Object)
		if !ok {
			continue
		}
		id := types.ID{Group: gvk.Group, Kind: gvk.Kind, Name: accessor.GetName()}
		if len(e.system.GetConflicts(id)) > 0 && !seen[id.String()] {
			seen[id.String()] = true
			e.conflicts = append(e.conflicts, id.String())
		}
	}
	sort.Strings(e.conflicts)
	return e, nil
}

// request is one object to mutate, as the webhook sees it.
type request struct {
	Op        string          `json:"op"`
	YAML      string          `json:"yaml"`
	Object    json.RawMessage `json:"object"`
	Namespace string          `json:"namespace"`
	Username  string          `json:"username"`
	Operation string          `json:"operation"`
	MinIters  int             `json:"min_iters"`
	MaxIters  int             `json:"max_iters"`
	BudgetMs  float64         `json:"budget_ms"`
	Batch     int             `json:"batch"`
	Warmup    int             `json:"warmup"`
	objectNS  string
	took, cpu time.Duration // of the last mutate
}

// prepare decodes the object as the webhook does and gives it the request's namespace.
func (e *engine) prepare(req *request) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object); err != nil {
		return nil, err
	}
	req.objectNS = obj.GetNamespace()
	obj.SetNamespace(req.Namespace)
	return obj, nil
}

// mutable builds what pkg/webhook/mutation.go hands to System.Mutate.
func (e *engine) mutable(req *request, obj *unstructured.Unstructured) *types.Mutable {
	var ns *corev1.Namespace
	gvk := obj.GroupVersionKind()
	switch {
	case gvk.Group == "" && gvk.Kind == "Namespace":
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: obj.GetName(), Labels: obj.GetLabels()}}
	case req.Namespace != "":
		// The API server labels every Namespace with its name.
		labels := map[string]string{"kubernetes.io/metadata.name": req.Namespace}
		for k, v := range e.namespaces[req.Namespace] {
			labels[k] = v
		}
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: req.Namespace, Labels: labels}}
	}
	operation := admissionv1.Operation(req.Operation)
	if operation == "" {
		operation = admissionv1.Create
	}
	return &types.Mutable{
		Object:    obj,
		Namespace: ns,
		Username:  req.Username,
		Source:    types.SourceTypeOriginal,
		Operation: operation,
	}
}

// mutate returns the admitted object (as JSON-ready content) and System.Mutate's answer. As in
// the webhook, an object that was not mutated is returned as it came, and a mutated one gets its
// own metadata.namespace back (SetNamespace("") removes the field).
func (e *engine) mutate(req *request) (map[string]interface{}, bool, error) {
	obj, err := e.prepare(req)
	if err != nil {
		return nil, false, err
	}
	mutable := e.mutable(req, obj)
	cpuStart, start := cpuNow(), time.Now()
	mutated, err := e.system.Mutate(context.Background(), mutable)
	req.took, req.cpu = time.Since(start), cpuNow()-cpuStart
	if err != nil {
		return nil, false, err
	}
	if !mutated {
		original := &unstructured.Unstructured{}
		if err := original.UnmarshalJSON(req.Object); err != nil {
			return nil, false, err
		}
		return original.Object, false, nil
	}
	obj.SetNamespace(req.objectNS)
	return obj.Object, true, nil
}

// cpuNow is the process's CPU time (every thread: the collector's work counts).
func cpuNow() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

type benchResult struct {
	Iters    int     `json:"iters"`
	MutateNs float64 `json:"mutate_ns"`
	CPUNs    float64 `json:"cpu_ns"`
	CopyNs   float64 `json:"copy_ns"`
	Mutated  bool    `json:"mutated"`
}

func (e *engine) bench(req *request) (*benchResult, error) {
	base, err := e.prepare(req)
	if err != nil {
		return nil, err
	}
	minIters, maxIters := max(req.MinIters, 1), req.MaxIters
	if maxIters < minIters {
		maxIters = minIters
	}
	budget := time.Duration(req.BudgetMs * float64(time.Millisecond))
	batch := max(req.Batch, 1)
	ctx := context.Background()

	// Untimed calls first, when asked for (the driver usually has just run "mutate").
	for i := 0; i < req.Warmup; i++ {
		if _, err := e.system.Mutate(ctx, e.mutable(req, base.DeepCopy())); err != nil {
			return nil, err
		}
	}

	mutated := false
	copies := make([]*unstructured.Unstructured, batch)
	mutables := make([]*types.Mutable, batch)
	var timed, cpu, copying time.Duration
	iters := 0
	for iters < maxIters && (iters < minIters || timed < budget) {
		n := min(batch, maxIters-iters)
		start := time.Now()
		for i := 0; i < n; i++ {
			copies[i] = base.DeepCopy()
			mutables[i] = e.mutable(req, copies[i])
		}
		copying += time.Since(start)
		cpuStart := cpuNow()
		start = time.Now()
		for i := 0; i < n; i++ {
			changed, err := e.system.Mutate(ctx, mutables[i])
			if err != nil {
				return nil, err
			}
			mutated = mutated || changed
		}
		timed += time.Since(start)
		cpu += cpuNow() - cpuStart
		for i := 0; i < n; i++ {
			copies[i], mutables[i] = nil, nil
		}
		iters += n
	}
	return &benchResult{
		Iters:    iters,
		MutateNs: float64(timed.Nanoseconds()) / float64(iters),
		CPUNs:    float64(cpu.Nanoseconds()) / float64(iters),
		CopyNs:   float64(copying.Nanoseconds()) / float64(iters),
		Mutated:  mutated,
	}, nil
}

func serve(in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 1<<30)
	writer := bufio.NewWriter(out)
	encoder := json.NewEncoder(writer)
	var e *engine
	for scanner.Scan() {
		line := bytes.TrimSpace(scanner.Bytes())
		if len(line) == 0 {
			continue
		}
		response := map[string]interface{}{"ok": true}
		fail := func(err error) {
			response = map[string]interface{}{"ok": false, "error": err.Error()}
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			fail(fmt.Errorf("bad request: %w", err))
		} else {
			switch req.Op {
			case "load":
				start := time.Now()
				loaded, err := load(bytes.NewReader([]byte(req.YAML)))
				if err != nil {
					fail(err)
					break
				}
				e = loaded
				response["mutators"] = e.mutators
				response["namespaces"] = len(e.namespaces)
				response["conflicts"] = append([]string{}, e.conflicts...)
				response["load_ms"] = float64(time.Since(start).Microseconds()) / 1000
			case "mutate", "bench":
				if e == nil {
					fail(errors.New("no mutators loaded (send a load request first)"))
					break
				}
				if req.Op == "mutate" {
					obj, mutated, err := e.mutate(&req)
					if err != nil {
						fail(err)
						break
					}
					response["mutated"] = mutated
					response["object"] = obj
					response["mutate_ns"] = req.took.Nanoseconds()
					response["cpu_ns"] = req.cpu.Nanoseconds()
				} else {
					result, err := e.bench(&req)
					if err != nil {
						fail(err)
						break
					}
					response["iters"] = result.Iters
					response["mutate_ns"] = result.MutateNs
					response["cpu_ns"] = result.CPUNs
					response["copy_ns"] = result.CopyNs
					response["mutated"] = result.Mutated
				}
			default:
				fail(fmt.Errorf("unknown op %q", req.Op))
			}
		}
		if err := encoder.Encode(response); err != nil {
			return err
		}
		if err := writer.Flush(); err != nil {
			return err
		}
	}
	return scanner.Err()
}

func mutateCommand(args []string) error {
	flags := flag.NewFlagSet("mutate", flag.ContinueOnError)
	mutatorsFile := flags.String("m", "", "mutators (YAML or JSON stream; Namespace documents supply labels)")
	namespace := flags.String("n", "default", "request namespace of objects whose metadata.namespace is empty")
	username := flags.String("u", "", "request username")
	operation := flags.String("operation", "CREATE", "request operation")
	objectsFile := flags.String("f", "-", "objects to mutate (YAML or JSON stream; - is stdin)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *mutatorsFile == "" {
		return errors.New("-m MUTATORS is required")
	}
	mf, err := os.Open(*mutatorsFile)
	if err != nil {
		return err
	}
	defer mf.Close()
	e, err := load(mf)
	if err != nil {
		return err
	}
	for _, id := range e.conflicts {
		fmt.Fprintf(os.Stderr, "conflict: %s is disabled (ErrConflictingSchema)\n", id)
	}
	var in io.Reader = os.Stdin
	if *objectsFile != "-" {
		f, err := os.Open(*objectsFile)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	docs, err := readStream(in)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	failed := false
	for i, doc := range docs {
		ns := *namespace
		var head struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		}
		if err := json.Unmarshal(doc, &head); err == nil && head.Metadata.Namespace != "" {
			ns = head.Metadata.Namespace
		}
		obj, _, err := e.mutate(&request{Object: doc, Namespace: ns, Username: *username, Operation: *operation})
		if err != nil {
			fmt.Fprintf(os.Stderr, "object %d: %v\n", i, err)
			failed = true
			continue
		}
		line, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	if failed {
		return errors.New("some objects were not mutated")
	}
	return nil
}

func version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == gatekeeperModule {
				return dep.Version
			}
		}
	}
	return "unknown"
}

func main() {
	// Matches() logs through controller-runtime; without a logger it complains after 30 s.
	logf.SetLogger(logr.Discard())
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gatekeeper-baseline mutate|serve|version ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		if path := os.Getenv("GATEKEEPER_BASELINE_CPUPROFILE"); path != "" {
			// A CPU profile of the whole session, for `go tool pprof`.
			f, ferr := os.Create(path)
			if ferr == nil {
				ferr = pprof.StartCPUProfile(f)
			}
			if ferr != nil {
				fmt.Fprintln(os.Stderr, "error:", ferr)
				os.Exit(1)
			}
			defer pprof.StopCPUProfile()
		}
		err = serve(os.Stdin, os.Stdout)
	case "mutate":
		err = mutateCommand(os.Args[2:])
	case "version":
		fmt.Printf("%s %s\n", gatekeeperModule, version())
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q (mutate, serve, version)\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
