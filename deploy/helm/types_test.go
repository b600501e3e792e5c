package helm_test

import (
	cmv1 "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"google.golang.org/protobuf/proto"
	istionet "istio.io/api/networking/v1alpha3"
	istiosec "istio.io/api/security/v1beta1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// apiTypes are the custom resources the chart may render, beyond the
// built-in kinds client-go's scheme knows, each decoded into its project's
// Go type.
var apiTypes = map[schema.GroupVersionKind]func() any{
	gwv1.SchemeGroupVersion.WithKind("Gateway"):   func() any { return &gwv1.Gateway{} },
	gwv1.SchemeGroupVersion.WithKind("HTTPRoute"): func() any { return &gwv1.HTTPRoute{} },

	egv1a1.GroupVersion.WithKind(egv1a1.KindSecurityPolicy):       func() any { return &egv1a1.SecurityPolicy{} },
	egv1a1.GroupVersion.WithKind(egv1a1.KindEnvoyExtensionPolicy): func() any { return &egv1a1.EnvoyExtensionPolicy{} },
	egv1a1.GroupVersion.WithKind(egv1a1.KindClientTrafficPolicy):  func() any { return &egv1a1.ClientTrafficPolicy{} },
	egv1a1.GroupVersion.WithKind(egv1a1.KindEnvoyPatchPolicy):     func() any { return &egv1a1.EnvoyPatchPolicy{} },

	cmv1.SchemeGroupVersion.WithKind("Certificate"): func() any { return &cmv1.Certificate{} },
	cmv1.SchemeGroupVersion.WithKind("Issuer"):      func() any { return &cmv1.Issuer{} },

	monitoringv1.SchemeGroupVersion.WithKind("ServiceMonitor"): func() any { return &monitoringv1.ServiceMonitor{} },
}

// protoSpecs are Istio's resources: their specs are protobuf messages
// (istio.io/api), decoded as proto3 JSON.
var protoSpecs = map[schema.GroupVersionKind]func() proto.Message{
	{Group: "networking.istio.io", Version: "v1", Kind: "Gateway"}:           func() proto.Message { return &istionet.Gateway{} },
	{Group: "networking.istio.io", Version: "v1", Kind: "VirtualService"}:    func() proto.Message { return &istionet.VirtualService{} },
	{Group: "networking.istio.io", Version: "v1alpha3", Kind: "EnvoyFilter"}: func() proto.Message { return &istionet.EnvoyFilter{} },
	{Group: "security.istio.io", Version: "v1", Kind: "PeerAuthentication"}:  func() proto.Message { return &istiosec.PeerAuthentication{} },
	{Group: "security.istio.io", Version: "v1", Kind: "AuthorizationPolicy"}: func() proto.Message { return &istiosec.AuthorizationPolicy{} },
}
