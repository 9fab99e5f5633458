// The call-style test runner for Java programs, compiled with the program and run by the JVM inside the jail.
//
// It reads the plan (JSON: a marker and, per test unit, the calls to make) from stdin and closes stdin; it finds each
// call's method by name and argument count on the program's classes (listed in the file named on the command line), static or on a fresh
// instance made with the no-argument constructor (LeetCode's `class Solution`); it converts the JSON arguments to the
// parameter types (numbers, booleans, strings, chars, arrays, List, Set, Map), calls the method in a thread under the
// unit's time limit, and writes one line per unit, "<marker> <JSON record>", with each returned value as JSON text.
// Expected values never come here: the host compares. The program runs in the runner's JVM and may learn the plan
// (call inputs and the marker); a line it forges with the marker gains nothing, since the host still compares the value
// in it with one the program never sees.
// Public and hidden tests come in separate runs (runner_plans.runner_groups): a run whose errors and values a verdict's
// reason may quote never holds a hidden input.
// It lives in a package of its own, and names every java.lang type it uses in a single-type import: a program's classes
// (in the default package, or even in this one) can neither replace it nor shadow the types it uses (a class Math of the
// program's would otherwise be the runner's Math). It is not public, so its file may have a name no Java class can
// have (gs-call-runner.java): a program's public class GsCallRunner gets a file of its own.
package gsrunner;

import java.io.FileDescriptor;
import java.lang.Boolean;
import java.lang.Byte;
import java.lang.Character;
import java.lang.Class;
import java.lang.ClassLoader;
import java.lang.Double;
import java.lang.Exception;
import java.lang.Float;
import java.lang.IllegalArgumentException;
import java.lang.Integer;
import java.lang.Long;
import java.lang.Math;
import java.lang.Number;
import java.lang.Object;
import java.lang.ReflectiveOperationException;
import java.lang.Runtime;
import java.lang.RuntimeException;
import java.lang.Short;
import java.lang.String;
import java.lang.StringBuilder;
import java.lang.SuppressWarnings;
import java.lang.System;
import java.lang.Thread;
import java.lang.Throwable;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Array;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

final class GsCallRunner {
    private static final int MAX_DEPTH = 200;

    // -- JSON: null, Boolean, Long / BigInteger / Double, String, List<Object>, Map<String, Object> --
    private static final class Parser {
        private final String s;
        private int i;

        Parser(String s) { this.s = s; }

        Object value(int depth) {
            if (depth > MAX_DEPTH) throw new IllegalArgumentException("nested too deeply");
            skip();
            char c = s.charAt(i);
            if (c == '{') {
                Map<String, Object> map = new LinkedHashMap<>();
                i++;
                skip();
                if (s.charAt(i) == '}') { i++; return map; }
                while (true) {
                    skip();
                    String key = string();
                    skip();
                    expect(':');
                    map.put(key, value(depth + 1));
                    skip();
                    if (s.charAt(i++) == '}') return map;
                }
            }
            if (c == '[') {
                List<Object> list = new ArrayList<>();
                i++;
                skip();
                if (s.charAt(i) == ']') { i++; return list; }
                while (true) {
                    list.add(value(depth + 1));
                    skip();
                    if (s.charAt(i++) == ']') return list;
                }
            }
            if (c == '"') return string();
            if (s.startsWith("true", i)) { i += 4; return Boolean.TRUE; }
            if (s.startsWith("false", i)) { i += 5; return Boolean.FALSE; }
            if (s.startsWith("null", i)) { i += 4; return null; }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) i++;
            String num = s.substring(start, i);
            if (num.isEmpty()) throw new IllegalArgumentException("bad JSON at " + start);
            if (num.contains(".") || num.contains("e") || num.contains("E")) return Double.parseDouble(num);
            BigInteger big = new BigInteger(num);
            return big.bitLength() < 64 ? (Object) big.longValue() : big;
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') return b.toString();
                if (c != '\\') { b.append(c); continue; }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n': b.append('\n'); break;
                    case 't': b.append('\t'); break;
                    case 'r': b.append('\r'); break;
                    case 'b': b.append('\b'); break;
                    case 'f': b.append('\f'); break;
                    case 'u': b.append((char) Integer.parseInt(s.substring(i, i + 4), 16)); i += 4; break;
                    default: b.append(e);
                }
            }
        }

        private void expect(char c) {
            if (s.charAt(i++) != c) throw new IllegalArgumentException("bad JSON at " + (i - 1));
        }

        private void skip() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }
    }

    static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        b.append('"');
    }

    /** A returned value as JSON; anything that is not plain data raises IllegalArgumentException. */
    static void json(StringBuilder b, Object v, int depth) {
        if (depth > MAX_DEPTH) throw new IllegalArgumentException("a value nested too deeply");
        if (v == null) b.append("null");
        else if (v instanceof Boolean) b.append(v);
        else if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte
                || v instanceof BigInteger) b.append(v);
        else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            b.append(Double.isFinite(d) ? Double.toString(d) : "null");
        } else if (v instanceof String) quote(b, (String) v);
        else if (v instanceof Character) quote(b, v.toString());
        else if (v.getClass().isArray()) {
            b.append('[');
            for (int k = 0; k < Array.getLength(v); k++) {
                if (k > 0) b.append(',');
                json(b, Array.get(v, k), depth + 1);
            }
            b.append(']');
        } else if (v instanceof Collection) {
            b.append('[');
            boolean first = true;
            for (Object item : (Collection<?>) v) {
                if (!first) b.append(',');
                first = false;
                json(b, item, depth + 1);
            }
            b.append(']');
        } else if (v instanceof Map) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) b.append(',');
                first = false;
                quote(b, String.valueOf(e.getKey()));
                b.append(':');
                json(b, e.getValue(), depth + 1);
            }
            b.append('}');
        } else throw new IllegalArgumentException("a value of type " + v.getClass().getName() + " is not plain data");
    }

    /** A JSON argument as a value of the parameter's type (IllegalArgumentException when it cannot be one). */
    static Object convert(Object v, Type type) {
        Class<?> raw = type instanceof ParameterizedType
                ? (Class<?>) ((ParameterizedType) type).getRawType()
                : type instanceof Class ? (Class<?>) type : Object.class;
        Type[] params = type instanceof ParameterizedType
                ? ((ParameterizedType) type).getActualTypeArguments() : new Type[0];
        if (v == null) {
            if (raw.isPrimitive()) throw new IllegalArgumentException("null for " + raw);
            return null;
        }
        if (raw == int.class || raw == Integer.class) return Math.toIntExact(integral(v));
        if (raw == long.class || raw == Long.class) return integral(v);
        if (raw == short.class || raw == Short.class) return (short) Math.toIntExact(integral(v));
        if (raw == byte.class || raw == Byte.class) return (byte) Math.toIntExact(integral(v));
        if (raw == double.class || raw == Double.class) return ((Number) v).doubleValue();
        if (raw == float.class || raw == Float.class) return ((Number) v).floatValue();
        if (raw == boolean.class || raw == Boolean.class) return (Boolean) v;
        if (raw == BigInteger.class) return new BigInteger(v.toString());
        if (raw == char.class || raw == Character.class) {
            String s = (String) v;
            if (s.length() != 1) throw new IllegalArgumentException("not one character");
            return s.charAt(0);
        }
        if (raw == String.class) return (String) v;
        if (raw.isArray()) {
            List<?> items = (List<?>) v;
            Object out = Array.newInstance(raw.getComponentType(), items.size());
            for (int k = 0; k < items.size(); k++) Array.set(out, k, convert(items.get(k), raw.getComponentType()));
            return out;
        }
        Type item = params.length > 0 ? params[0] : Object.class;
        if (raw.isAssignableFrom(ArrayList.class)) {
            List<Object> out = new ArrayList<>();
            for (Object x : (List<?>) v) out.add(convert(x, item));
            return out;
        }
        if (raw.isAssignableFrom(LinkedHashSet.class)) {
            Set<Object> out = new LinkedHashSet<>();
            for (Object x : (List<?>) v) out.add(convert(x, item));
            return out;
        }
        if (raw.isAssignableFrom(LinkedHashMap.class)) {
            Map<Object, Object> out = new LinkedHashMap<>();
            Type valueType = params.length > 1 ? params[1] : Object.class;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                Object key = params.length > 0 && params[0] != String.class && params[0] != Object.class
                        ? convert(new Parser((String) e.getKey()).value(0), params[0]) : e.getKey();
                out.put(key, convert(e.getValue(), valueType));
            }
            return out;
        }
        if (raw == Object.class) return v;
        throw new IllegalArgumentException("cannot pass JSON as " + type.getTypeName());
    }

    private static long integral(Object v) {
        if (v instanceof Long) return (Long) v;
        if (v instanceof Double && ((Double) v) == Math.rint((Double) v)) return ((Double) v).longValue();
        throw new IllegalArgumentException("not an integer that fits 64 bits");
    }

    /** One call: the first method of that name and arity whose parameters the arguments convert to. */
    static String[] call(List<Class<?>> classes, String fn, List<?> args) {
        String problem = "no method " + fn + " taking " + args.size() + " arguments";
        for (Class<?> cls : classes) {
            for (Method m : cls.getDeclaredMethods()) {
                if (!m.getName().equals(fn) || m.getParameterCount() != args.size()) continue;
                Object[] values = new Object[args.size()];
                try {
                    Type[] types = m.getGenericParameterTypes();
                    for (int k = 0; k < values.length; k++) values[k] = convert(args.get(k), types[k]);
                } catch (RuntimeException e) {
                    problem = "arguments do not fit " + m.getName() + ": " + e;
                    continue;
                }
                try {
                    m.setAccessible(true);
                    Object self = null;
                    if (!Modifier.isStatic(m.getModifiers())) {
                        var ctor = cls.getDeclaredConstructor();
                        ctor.setAccessible(true);
                        self = ctor.newInstance();
                    }
                    Object result = m.invoke(self, values);
                    StringBuilder b = new StringBuilder();
                    try {
                        json(b, result, 0);
                    } catch (IllegalArgumentException e) {
                        return new String[] {"E", "returned " + e.getMessage()};
                    }
                    return new String[] {"J", b.toString()};
                } catch (InvocationTargetException e) {
                    return new String[] {"E", String.valueOf(e.getCause())};
                } catch (ReflectiveOperationException | RuntimeException e) {
                    return new String[] {"E", String.valueOf(e)};
                }
            }
        }
        return new String[] {"E", problem};
    }

    @SuppressWarnings({"unchecked", "deprecation"})
    public static void main(String[] argv) throws Exception {
        Map<String, Object> plan = (Map<String, Object>) new Parser(
                new String(System.in.readAllBytes(), StandardCharsets.UTF_8)).value(0);
        System.in.close();
        final String marker = (String) plan.get("marker");
        final PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, "UTF-8");
        List<Class<?>> classes = new ArrayList<>();
        String loadProblem = null;
        String loadStatus = "import_error";
        ClassLoader loader = GsCallRunner.class.getClassLoader();
        // The class names, one a line, from the file named first on the command line (never the names themselves there).
        // Loaded here without initialising them: their static initialisers are the program's code, run below under the
        // item's time limit (as node's load of a program is), never untimed in this thread.
        for (String name : java.nio.file.Files.readAllLines(java.nio.file.Path.of(argv[0]), StandardCharsets.UTF_8)) {
            if (name.isEmpty()) continue;
            try {
                classes.add(Class.forName(name, false, loader));
            } catch (Throwable e) {
                loadProblem = "class " + name + " failed to load: " + e;
            }
        }
        if (loadProblem == null) {
            final String[] initProblem = {null};
            Thread init = new Thread(() -> {
                for (Class<?> cls : classes) {
                    try {
                        Class.forName(cls.getName(), true, loader);
                    } catch (Throwable e) {
                        initProblem[0] = "class " + cls.getName() + " failed to load: " + e;
                        return;
                    }
                }
            });
            init.setDaemon(true);
            init.start();
            double importLimit = ((Number) plan.get("import_limit_s")).doubleValue();
            init.join(Math.max(1, Math.round(importLimit * 1000)));
            if (init.isAlive()) {
                loadStatus = "import_timeout";
                loadProblem = "loading the program took longer than " + importLimit + "s";
            } else {
                loadProblem = initProblem[0];
            }
        }
        boolean stopOnFailure = Boolean.TRUE.equals(plan.get("stop_on_failure"));
        String[] stopped = null;
        List<Map<String, Object>> units = (List<Map<String, Object>>) plan.get("units");
        for (int index = 0; index < units.size(); index++) {
            StringBuilder rec = new StringBuilder("{\"unit\":").append(index);
            Map<String, Object> unit = units.get(index);
            if (stopped != null || loadProblem != null) {
                String[] why = stopped != null ? stopped : new String[] {loadStatus, loadProblem};
                rec.append(",\"status\":");
                quote(rec, why[0]);
                rec.append(",\"detail\":");
                quote(rec, why[1]);
            } else {
                List<Map<String, Object>> calls = (List<Map<String, Object>>) unit.get("calls");
                List<String[]> answers = new ArrayList<>();
                Thread worker = new Thread(() -> {
                    for (Map<String, Object> c : calls) {
                        answers.add(call(classes, (String) c.get("fn"), (List<?>) c.get("args")));
                    }
                });
                worker.setDaemon(true);
                worker.start();
                long limitMs = Math.max(1, Math.round(((Number) unit.get("time_limit_s")).doubleValue() * 1000));
                worker.join(limitMs);
                boolean timedOut = worker.isAlive();
                if (timedOut) {
                    try {
                        worker.stop(); // a best effort (refused from Java 20 on); the jail's limits bound the rest
                    } catch (Throwable e) {
                        // it keeps running as a daemon thread until the run ends
                    }
                    rec.append(",\"status\":\"timeout\"");
                } else {
                    rec.append(",\"status\":\"done\",\"answers\":[");
                    for (int k = 0; k < answers.size(); k++) {
                        if (k > 0) rec.append(',');
                        rec.append('[');
                        quote(rec, answers.get(k)[0]);
                        rec.append(',');
                        quote(rec, answers.get(k)[1]);
                        rec.append(']');
                    }
                    rec.append(']');
                }
                boolean failed = timedOut || answers.stream().anyMatch(a -> !a[0].equals("J"));
                if (stopOnFailure && failed) stopped = new String[] {"skipped", "an earlier test failed"};
            }
            out.print(marker + " " + rec.append('}') + "\n");
            out.flush();
        }
        out.print(marker + " {\"end\":true}\n");
        out.flush();
        Runtime.getRuntime().halt(0);
    }
}
