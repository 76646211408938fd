{{- define "tgs.fullname" -}}
{{- if contains "tgs" .Release.Name -}}{{ .Release.Name | trunc 50 | trimSuffix "-" }}{{- else -}}{{ printf "%s-tgs" .Release.Name | trunc 50 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "tgs.labels" -}}
app.kubernetes.io/name: tgs
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: (dict "root" $ "component" "api") */}}
{{- define "tgs.selectorLabels" -}}
app.kubernetes.io/name: tgs
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tgs.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "tgs.rootUrl" -}}
{{- if .Values.rootUrl -}}{{ .Values.rootUrl }}{{- else -}}http://{{ include "tgs.fullname" . }}-api.{{ .Release.Namespace }}.svc{{ if ne (int .Values.api.service.port) 80 }}:{{ .Values.api.service.port }}{{ end }}{{- end -}}
{{- end -}}

{{- define "tgs.podAnnotations" -}}
{{- if .Values.prometheus.annotations }}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .Values.metricsPort | quote }}
prometheus.io/path: /metrics
{{- end }}
{{- end -}}

{{/* The environment of a process that talks to Postgres, RabbitMQ and Temporal. Secrets only by reference. */}}
{{- define "tgs.env" -}}
- name: DATABASE_URL
  valueFrom: { secretKeyRef: { name: {{ required "postgres.existingSecret: the Secret with the Postgres URLs" .Values.postgres.existingSecret | quote }}, key: {{ .Values.postgres.appUrlKey | quote }} } }
- name: AMQP_URL
  valueFrom: { secretKeyRef: { name: {{ required "rabbitmq.existingSecret: the Secret with AMQP_URL" .Values.rabbitmq.existingSecret | quote }}, key: {{ .Values.rabbitmq.urlKey | quote }} } }
- name: TEMPORAL_ADDRESS
  value: {{ required "temporal.address" .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
- name: TGS_TASK_QUEUE
  value: {{ .Values.temporal.taskQueue | quote }}
{{- with .Values.temporal.uiUrl }}
- name: TGS_TEMPORAL_UI_URL
  value: {{ . | quote }}
{{- end }}
{{- with .Values.temporal.clientId }}
- name: TGS_TEMPORAL_CLIENT_ID
  value: {{ . | quote }}
{{- end }}
{{- if .Values.temporal.tlsSecret }}
- name: TEMPORAL_TLS_CERT
  value: /etc/tgs/temporal-tls/tls.crt
- name: TEMPORAL_TLS_KEY
  value: /etc/tgs/temporal-tls/tls.key
{{- end }}
{{- if .Values.temporal.apiKeySecret }}
- name: TEMPORAL_API_KEY
  valueFrom: { secretKeyRef: { name: {{ .Values.temporal.apiKeySecret | quote }}, key: {{ .Values.temporal.apiKeyKey | quote }} } }
{{- end }}
- name: TGS_ROOT_URL
  value: {{ include "tgs.rootUrl" . | quote }}
- name: HOST
  value: "0.0.0.0"
- name: TGS_METRICS_PORT
  value: {{ .Values.metricsPort | quote }}
{{- range $name, $value := .Values.env }}
- name: {{ $name }}
  value: {{ $value | quote }}
{{- end }}
{{- end -}}

{{- define "tgs.temporalTlsVolume" -}}
{{- if .Values.temporal.tlsSecret }}
volumes:
  - name: temporal-tls
    secret: { secretName: {{ .Values.temporal.tlsSecret | quote }} }
{{- end }}
{{- end -}}

{{- define "tgs.temporalTlsMount" -}}
{{- if .Values.temporal.tlsSecret }}
volumeMounts:
  - { name: temporal-tls, mountPath: /etc/tgs/temporal-tls, readOnly: true }
{{- end }}
{{- end -}}
