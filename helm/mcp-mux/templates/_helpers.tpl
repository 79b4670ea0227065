{{/*
Library templates. The chart's own Deployment uses them, and so can an
agent's chart that adds mcp-mux as a sidecar (mode: sidecar). They read only
.Values (this chart's values) and .Release, so a parent chart passes

  (dict "Values" (index .Values "mcp-mux") "Release" .Release)

See README, "Kubernetes", for the full snippet.
*/}}

{{/* Base name of every object: <release>-mcp-mux. */}}
{{- define "mcp-mux.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains "mcp-mux" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-mcp-mux" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The ConfigMap that holds extensions_config.json. */}}
{{- define "mcp-mux.configMapName" -}}
{{- default (printf "%s-config" (include "mcp-mux.fullname" .)) .Values.existingConfigMap -}}
{{- end -}}

{{- define "mcp-mux.selectorLabels" -}}
app.kubernetes.io/name: mcp-mux
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mcp-mux.labels" -}}
{{ include "mcp-mux.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
Refuses value sets that would not work: the mode, several replicas without a
shared store (or with the one-replica data claim), a config block that is
not an object, and a network-facing Deployment that identifies nobody. A
null block counts as an absent one.
*/}}
{{- define "mcp-mux.validate" -}}
{{- if not (has .Values.mode (list "deployment" "sidecar")) -}}
{{- fail (printf "mode must be \"deployment\" or \"sidecar\", not %q" (toString .Values.mode)) -}}
{{- end -}}
{{- if not .Values.existingConfigMap -}}
{{- $cfg := include "mcp-mux.config" . | fromJson -}}
{{- $store := include "mcp-mux.block" (list $cfg "store" "config.store" "{redis_url: $REDIS_URL}") | fromJson -}}
{{- $inbound := include "mcp-mux.block" (list $cfg "inbound" "config.inbound" "{auth: {mode: api_keys, keys: {…}}}") | fromJson -}}
{{- $auth := include "mcp-mux.block" (list $inbound "auth" "config.inbound.auth" "{mode: api_keys, keys: {…}}") | fromJson -}}
{{- if and (gt (int .Values.replicas) 1) .Values.dataPersistentVolumeClaim -}}
{{- fail "dataPersistentVolumeClaim holds the embedded task store of one replica: with replicas > 1 the tasks live in config.store.redis_url; unset it" -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (not (get $store "redis_url")) -}}
{{- fail "replicas > 1 needs config.store.redis_url: durable tasks and their leases must be shared by the replicas" -}}
{{- end -}}
{{- if and (eq .Values.mode "deployment") (eq (get $auth "mode" | default "none") "none") (not (get $auth "allow_remote")) -}}
{{- fail "mode deployment listens on 0.0.0.0 and config.inbound.auth.mode is \"none\": choose api_keys, jwt or trusted_header, or set config.inbound.auth.allow_remote: true" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The mux config as JSON: .Values.config, a null or absent one as {}; one
that is not an object is refused. Who may call fails closed: a Deployment
(listening on 0.0.0.0) whose config.inbound.auth names no mode gets
api_keys, and api_keys with no keys gets one key, user "default", read
from $MCP_MUX_API_KEY (put it in the Secret envFromSecret names; until the
variable is set the mux does not start). A sidecar's unset mode stays
unset: none, on 127.0.0.1.
*/}}
{{- define "mcp-mux.config" -}}
{{- $cfg := .Values.config | default dict -}}
{{- if not (kindIs "map" $cfg) -}}
{{- fail (printf "config must be an object (the mcp-mux config file), not %s" (kindOf $cfg)) -}}
{{- end -}}
{{- $cfg = deepCopy $cfg -}}
{{- $inbound := include "mcp-mux.block" (list $cfg "inbound" "config.inbound" "{auth: {mode: api_keys, keys: {…}}}") | fromJson -}}
{{- $auth := include "mcp-mux.block" (list $inbound "auth" "config.inbound.auth" "{mode: api_keys, keys: {…}}") | fromJson -}}
{{- $changed := false -}}
{{- if and (eq (toString .Values.mode) "deployment") (not (get $auth "mode")) -}}
{{- $_ := set $auth "mode" "api_keys" -}}
{{- $changed = true -}}
{{- end -}}
{{- if and (eq (toString (get $auth "mode")) "api_keys") (not (get $auth "keys")) -}}
{{- $_ := set $auth "keys" (dict "default" "$MCP_MUX_API_KEY") -}}
{{- $changed = true -}}
{{- end -}}
{{- if $changed -}}
{{- $_ := set $inbound "auth" $auth -}}
{{- $_ := set $cfg "inbound" $inbound -}}
{{- end -}}
{{- toJson $cfg -}}
{{- end -}}

{{/* Whether the config's callers use the chart's default key, $MCP_MUX_API_KEY. */}}
{{- define "mcp-mux.defaultKey" -}}
{{- if not .Values.existingConfigMap -}}
{{- $cfg := include "mcp-mux.config" . | fromJson -}}
{{- $keys := get (get (get $cfg "inbound" | default dict) "auth" | default dict) "keys" | default dict -}}
{{- if and (kindIs "map" $keys) (eq (toString (get $keys "default")) "$MCP_MUX_API_KEY") -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/*
One object block of a config object, as JSON: (list parent key path
example); a null or absent block is {}, one that is not an object is
refused with its path and an example.
*/}}
{{- define "mcp-mux.block" -}}
{{- $v := get (index . 0) (index . 1) | default dict -}}
{{- if not (kindIs "map" $v) -}}
{{- fail (printf "%s must be an object, e.g. %s, not %s" (index . 2) (index . 3) (kindOf $v)) -}}
{{- end -}}
{{- toJson $v -}}
{{- end -}}

{{/* The mcp-mux container (one list item). */}}
{{- define "mcp-mux.container" -}}
- name: mcp-mux
  image: {{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args: ["serve", "--log-format", {{ .Values.logFormat | quote }}, "--log-level", {{ .Values.logLevel | quote }}]
  env:
    - name: MCP_MUX_CONFIG
      value: /etc/mcp-mux/extensions_config.json
    - name: MCP_MUX_LISTEN
      value: {{ printf "%s:%d" (ternary "127.0.0.1" "0.0.0.0" (eq .Values.mode "sidecar")) (int .Values.port) | quote }}
    - name: MCP_MUX_OPS_LISTEN
      value: {{ printf "0.0.0.0:%d" (int .Values.opsPort) | quote }}
    - name: MCP_MUX_DATA_DIR
      value: /var/lib/mcp-mux
    - name: MCP_MUX_SHUTDOWN_DELAY
      value: {{ printf "%ds" (int .Values.shutdownDelaySeconds) | quote }}
    {{- with .Values.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.envFromSecret }}
  envFrom:
    - secretRef:
        name: {{ . }}
  {{- end }}
  ports:
    {{- if eq .Values.mode "deployment" }}
    - name: http
      containerPort: {{ .Values.port }}
      protocol: TCP
    {{- end }}
    - name: mcp-mux-ops
      containerPort: {{ .Values.opsPort }}
      protocol: TCP
  livenessProbe:
    httpGet:
      path: /healthz
      port: mcp-mux-ops
    {{- toYaml .Values.livenessProbe | nindent 4 }}
  readinessProbe:
    httpGet:
      path: /readyz
      port: mcp-mux-ops
    {{- toYaml .Values.readinessProbe | nindent 4 }}
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    {{- toYaml .Values.securityContext | nindent 4 }}
  volumeMounts:
    # The whole directory, never a subPath: the kubelet updates a ConfigMap
    # by swapping the directory's contents, which a subPath mount never sees.
    - name: mcp-mux-config
      mountPath: /etc/mcp-mux
      readOnly: true
    - name: mcp-mux-data
      mountPath: /var/lib/mcp-mux
    - name: mcp-mux-tmp
      mountPath: /tmp
{{- end -}}

{{/* The volumes the container mounts (list items). */}}
{{- define "mcp-mux.volumes" -}}
- name: mcp-mux-config
  configMap:
    name: {{ include "mcp-mux.configMapName" . }}
- name: mcp-mux-data
  {{- if .Values.dataPersistentVolumeClaim }}
  persistentVolumeClaim:
    claimName: {{ .Values.dataPersistentVolumeClaim | quote }}
  {{- else }}
  emptyDir:
    sizeLimit: {{ .Values.dataSizeLimit }}
  {{- end }}
- name: mcp-mux-tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end -}}

{{/*
The Service's session affinity: service.sessionAffinity when set; else
None when config.store.redis_url shares the sessions (any replica serves
any session), ClientIP when it does not (a 2025-era session lives in one
replica's memory).
*/}}
{{- define "mcp-mux.sessionAffinity" -}}
{{- if .Values.service.sessionAffinity -}}
{{- .Values.service.sessionAffinity -}}
{{- else -}}
{{- $redis := "" -}}
{{- if not .Values.existingConfigMap -}}
{{- $cfg := include "mcp-mux.config" . | fromJson -}}
{{- $store := include "mcp-mux.block" (list $cfg "store" "config.store" "{redis_url: $REDIS_URL}") | fromJson -}}
{{- $redis = get $store "redis_url" -}}
{{- end -}}
{{- if $redis -}}None{{- else -}}ClientIP{{- end -}}
{{- end -}}
{{- end -}}
