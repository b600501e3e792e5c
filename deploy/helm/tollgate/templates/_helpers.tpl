{{/* The release's base name: the release name, or "tollgate" inside it. */}}
{{- define "tollgate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "tollgate.selector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: tollgate
{{- end -}}

{{- define "tollgate.envoySelector" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: envoy
{{- end -}}

{{- define "tollgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tollgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The headless Service that names every replica's gRPC port (Envoy's STRICT_DNS). */}}
{{- define "tollgate.grpcService" -}}
{{- printf "%s-grpc" (include "tollgate.fullname" .) -}}
{{- end -}}

{{- define "tollgate.grpcHost" -}}
{{- printf "%s.%s.svc.%s" (include "tollgate.grpcService" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{- define "tollgate.dashboardHost" -}}
{{- printf "%s.%s.svc.%s" (include "tollgate.fullname" .) .Release.Namespace .Values.clusterDomain -}}
{{- end -}}

{{/* grpc.mtls resolved: own or mesh, checked against the front. */}}
{{- define "tollgate.mtls" -}}
{{- $front := .Values.front -}}
{{- if not (has $front (list "envoy" "envoyGateway" "istio")) -}}
{{- fail (printf "front %q: want envoy, envoyGateway or istio" $front) -}}
{{- end -}}
{{- $m := .Values.grpc.mtls | default (ternary "own" "mesh" (eq $front "envoy")) -}}
{{- if not (has $m (list "own" "mesh")) -}}
{{- fail (printf "grpc.mtls %q: want own or mesh" $m) -}}
{{- end -}}
{{- if and (ne $front "envoy") (eq $m "own") -}}
{{- fail (printf "front %s with grpc.mtls=own: that front's proxies cannot present Tollgate's client certificate; use grpc.mtls=mesh (Tollgate behind a mesh that enforces mutual TLS)" $front) -}}
{{- end -}}
{{- $m -}}
{{- end -}}

{{/* Secrets of the certificates of grpc.mtls=own. */}}
{{- define "tollgate.serverTLSSecret" -}}
{{- if eq .Values.tls.source "secret" -}}
{{- required "tls.source=secret needs tls.serverSecret" .Values.tls.serverSecret -}}
{{- else -}}
{{- printf "%s-grpc-server-tls" (include "tollgate.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.clientTLSSecret" -}}
{{- if eq .Values.tls.source "secret" -}}
{{- required "tls.source=secret needs tls.clientSecret" .Values.tls.clientSecret -}}
{{- else -}}
{{- printf "%s-grpc-client-tls" (include "tollgate.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.databaseSecret" -}}
{{- if .Values.database.existingSecret -}}
{{- .Values.database.existingSecret -}}
{{- else if .Values.database.url -}}
{{- printf "%s-database" (include "tollgate.fullname" .) -}}
{{- else -}}
{{- fail "database.url or database.existingSecret is required (a PostgreSQL URL)" -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.databaseKey" -}}
{{- ternary .Values.database.existingSecretKey "url" (ne .Values.database.existingSecret "") -}}
{{- end -}}

{{- define "tollgate.redisSecret" -}}
{{- if .Values.redis.existingSecret -}}
{{- .Values.redis.existingSecret -}}
{{- else if .Values.redis.url -}}
{{- printf "%s-redis" (include "tollgate.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "tollgate.redisKey" -}}
{{- ternary .Values.redis.existingSecretKey "url" (ne .Values.redis.existingSecret "") -}}
{{- end -}}

{{- define "tollgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The environment every Tollgate container gets: the database, Redis, provider keys. */}}
{{- define "tollgate.env" -}}
- name: TOLLGATE_DB
  valueFrom:
    secretKeyRef:
      name: {{ include "tollgate.databaseSecret" . }}
      key: {{ include "tollgate.databaseKey" . }}
{{- with include "tollgate.redisSecret" . }}
- name: TOLLGATE_REDIS
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ include "tollgate.redisKey" $ }}
{{- end }}
- name: TOLLGATE_CONFIG
  value: /etc/tollgate/config.yaml
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "tollgate.envFrom" -}}
{{- with .Values.providerKeys.existingSecret }}
envFrom:
  - secretRef:
      name: {{ . }}
{{- end }}
{{- end -}}

{{/* files/envoy.yaml with its one substitution: Tollgate's address. */}}
{{- define "tollgate.envoyBootstrap" -}}
{{- .Files.Get "files/envoy.yaml"
    | replace "{address: tollgate, port_value: 9001}" (printf "{address: %s, port_value: 9001}" (include "tollgate.grpcHost" .))
    | replace "{address: tollgate, port_value: 8081}" (printf "{address: %s, port_value: %v}" (include "tollgate.dashboardHost" .) .Values.services.dashboard.port) -}}
{{- end -}}
