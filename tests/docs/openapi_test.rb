# openapi_test.rb DOCS_DIR — docs/openapi.yaml is what a client generator reads: it must load as
# YAML, be an OpenAPI 3 document whose every $ref resolves and every operation answers something,
# and name the same operations as the prose: its endpoint headings ("### GET /v1/tubes, ...") and
# the rows of its endpoint tables ("| `GET /v1/schedules` | ...").
# Ruby's standard YAML (Psych, on libyaml), as ruby is already among the test packages.
require 'yaml'

docs = ARGV.fetch(0)
failures = []
spec = begin
  YAML.safe_load(File.read(File.join(docs, 'openapi.yaml')))
rescue Psych::Exception => e
  abort "openapi.yaml is not YAML: #{e.message}"
end
failures << "openapi is #{spec['openapi'].inspect}, not 3.x" unless spec['openapi'].to_s.start_with?('3.')

def walk(node, path, &block)
  case node
  when Hash
    yield node, path
    node.each { |k, v| walk(v, "#{path}/#{k}", &block) }
  when Array
    node.each_with_index { |v, i| walk(v, "#{path}/#{i}", &block) }
  end
end

walk(spec, '') do |node, path|
  ref = node['$ref']
  next unless ref
  target = ref.delete_prefix('#/').split('/').reduce(spec) { |at, key| at.is_a?(Hash) ? at[key] : nil }
  failures << "#{path}: $ref #{ref} resolves to nothing" if target.nil?
end

methods = %w[get put post patch delete]
in_spec = []
(spec['paths'] || {}).each do |route, item|
  item.each do |method, op|
    next unless methods.include?(method)
    in_spec << "#{method.upcase} #{route}"
    responses = op['responses'] || {}
    failures << "#{method.upcase} #{route}: no responses" if responses.empty?
    responses.each do |status, response|
      next if response.key?('$ref') || response['description'].to_s.strip != ''
      failures << "#{method.upcase} #{route} #{status}: no description"
    end
  end
end

in_prose = []
Dir[File.join(docs, '*.md')].each do |file|
  File.foreach(file) do |line|
    named = if line.start_with?('### ')
              line
            elsif line.start_with?('| `')
              line[/\A\|[^|]*/]
            end
    next unless named
    named.scan(%r{\b(GET|PUT|POST|PATCH|DELETE) (/[^\s,`?]+)}) { |m, r| in_prose << "#{m} #{r}" }
  end
end
(in_prose - in_spec).uniq.each { |op| failures << "#{op}: in the docs, not in openapi.yaml" }
(in_spec - in_prose).uniq.each { |op| failures << "#{op}: in openapi.yaml, not in the docs" }

if failures.empty?
  puts "openapi.yaml: #{in_spec.size} operations, each in the docs"
else
  puts failures
  exit 1
end
